//! Host references: the f64-accumulating reference GEMM and activation quantization.
use crate::dtype::DType;
use crate::error::{c_i32, c_i64, check, product, Error, Result};
use crate::sys;

fn require(name: &str, len: usize, needed: usize) -> Result<()> {
    if len != needed {
        return Err(Error::invalid(format!("'{name}' has {len} elements, expected {needed}")));
    }
    Ok(())
}

/// `C[M,N] = A[M,K] * W[N,K]^T (+ bias[N])`, all f32 row-major, with f64 sums.
pub fn reference_gemm_f32(
    a: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    m: usize,
    n: usize,
    k: usize,
) -> Result<Vec<f32>> {
    require("a", a.len(), product("a", &[m, k])?)?;
    require("w", w.len(), product("w", &[n, k])?)?;
    if let Some(b) = bias {
        require("bias", b.len(), n)?;
    }
    let mut c = vec![0f32; product("c", &[m, n])?];
    let bias_ptr = bias.map_or(std::ptr::null(), |b| b.as_ptr());
    check(unsafe {
        sys::hm_reference_gemm_f32(
            a.as_ptr(),
            w.as_ptr(),
            bias_ptr,
            c.as_mut_ptr(),
            c_i64(m, "m")?,
            c_i64(n, "n")?,
            c_i64(k, "k")?,
        )
    })?;
    Ok(c)
}

/// Quantized activations: codes (8-bit dtypes `[M][K]`, 4-bit `[M][ceil(K/2)]`, even k in the
/// low nibble) and f32 scales `[M][G]`.
#[derive(Clone, Debug, PartialEq)]
pub struct QuantizedActivation {
    pub codes: Vec<u8>,
    pub scales: Vec<f32>,
}

// Elements of codes and scales, from the same checked values the library gets (group_k must
// fit the ABI's int32_t: sized from a wider one, the scales would be too few for the library).
fn activation_sizes(dtype: DType, m: usize, k: usize, group_k: usize) -> Result<(usize, usize)> {
    c_i32(group_k, "group_k")?;
    let cols = if dtype.bits() >= 8 { k } else { k.div_ceil(2) };
    let groups = if group_k == 0 { 1 } else { k.div_ceil(group_k) };
    Ok((product("codes", &[m, cols])?, product("scales", &[m, groups])?))
}

/// Quantizes f32 activations `a[M][K]` to `dtype` (e4m3, e5m2, int8, int4 or e2m1), one scale
/// per token (`group_k == 0`) or per token and group of `group_k`.
pub fn quantize_activation(
    dtype: DType,
    a: &[f32],
    m: usize,
    k: usize,
    group_k: usize,
) -> Result<QuantizedActivation> {
    require("a", a.len(), product("a", &[m, k])?)?;
    let (codes, scales) = activation_sizes(dtype, m, k, group_k)?;
    let mut out = QuantizedActivation { codes: vec![0; codes], scales: vec![0.0; scales] };
    check(unsafe {
        sys::hm_quantize_activation(
            dtype.0,
            a.as_ptr(),
            c_i64(m, "m")?,
            c_i64(k, "k")?,
            c_i32(group_k, "group_k")?,
            out.codes.as_mut_ptr().cast(),
            out.scales.as_mut_ptr(),
        )
    })?;
    Ok(out)
}

/// The inverse of [`quantize_activation`]: f32 `[M][K]`.
pub fn dequantize_activation(
    dtype: DType,
    q: &QuantizedActivation,
    m: usize,
    k: usize,
    group_k: usize,
) -> Result<Vec<f32>> {
    let (codes, scales) = activation_sizes(dtype, m, k, group_k)?;
    require("codes", q.codes.len(), codes)?;
    require("scales", q.scales.len(), scales)?;
    let mut out = vec![0f32; product("out", &[m, k])?];
    check(unsafe {
        sys::hm_dequantize_activation(
            dtype.0,
            q.codes.as_ptr().cast(),
            q.scales.as_ptr(),
            c_i64(m, "m")?,
            c_i64(k, "k")?,
            c_i32(group_k, "group_k")?,
            out.as_mut_ptr(),
        )
    })?;
    Ok(out)
}

/// Scales per row of activation quantization: 1 for `group_k == 0` (per token), else
/// `ceil(k / group_k)`.
pub fn activation_scale_groups(k: usize, group_k: usize) -> Result<usize> {
    let mut out: i64 = 0;
    let (k, group_k) = (c_i64(k, "k")?, c_i32(group_k, "group_k")?);
    check(unsafe { sys::hm_activation_scale_groups(k, group_k, &mut out) })?;
    Ok(out as usize)
}

/// Device buffers of [`quantize_activation_device`]: `a` `[M][K]` f16 or bf16 (its dtype given
/// by `in_dtype`), an optional int32 `[K]` permutation (output column j reads input column
/// `perm[j]`), `codes` one byte per element `[M][K]` and f32 `scales` `[M][G]`.
pub struct DeviceActivation<'a> {
    pub in_dtype: DType,
    pub m: usize,
    pub k: usize,
    pub a: &'a dyn crate::context::DeviceMemory,
    pub perm: Option<&'a dyn crate::context::DeviceMemory>,
}

/// Quantizes activations on the device (`hm_quantize_activation_device`) into `out_dtype`
/// (e4m3, e5m2 or int8), bit for bit what [`quantize_activation`] computes on the host for the
/// same values; `group_k` is 0 (per token) or a multiple of 8. Asynchronous on `stream`: every
/// buffer's size is checked first.
pub fn quantize_activation_device(
    context: &crate::context::Context,
    input: &DeviceActivation,
    out_dtype: DType,
    group_k: usize,
    codes: &mut dyn crate::context::DeviceMemory,
    scales: &mut dyn crate::context::DeviceMemory,
    stream: crate::context::Stream,
) -> Result<()> {
    let groups = activation_scale_groups(input.k, group_k)?;
    let need = |name: &str, have: usize, want: usize| -> Result<()> {
        if have < want {
            return Err(Error::invalid(format!(
                "'{name}' has {have} bytes of device memory, needs {want}"
            )));
        }
        Ok(())
    };
    need("a", input.a.byte_len(), product("a", &[input.m, input.k, 2])?)?;
    need("codes", codes.byte_len(), product("codes", &[input.m, input.k])?)?;
    need("scales", scales.byte_len(), product("scales", &[input.m, groups, 4])?)?;
    let mut args: sys::hm_activation_quant_args_t = unsafe { std::mem::zeroed() };
    unsafe { sys::hm_activation_quant_args_init_sized(&mut args, std::mem::size_of_val(&args)) };
    args.in_dtype = input.in_dtype.0;
    args.out_dtype = out_dtype.0;
    args.group_k = c_i32(group_k, "group_k")?;
    args.m = c_i64(input.m, "m")?;
    args.k = c_i64(input.k, "k")?;
    args.a = input.a.device_ptr().0;
    if let Some(p) = input.perm {
        need("perm", p.byte_len(), product("perm", &[input.k, 4])?)?;
        args.perm = p.device_ptr().0;
    }
    args.codes = codes.device_ptr().0;
    args.scales = scales.device_ptr().0;
    check(unsafe { sys::hm_quantize_activation_device(context.as_raw(), &args, stream.as_raw()) })
}
