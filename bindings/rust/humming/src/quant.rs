//! Host references: the f64-accumulating reference GEMM and activation quantization.
use crate::dtype::DType;
use crate::error::{check, Error, Result};
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
    require("a", a.len(), m * k)?;
    require("w", w.len(), n * k)?;
    if let Some(b) = bias {
        require("bias", b.len(), n)?;
    }
    let mut c = vec![0f32; m * n];
    let bias_ptr = bias.map_or(std::ptr::null(), |b| b.as_ptr());
    check(unsafe {
        sys::hm_reference_gemm_f32(
            a.as_ptr(),
            w.as_ptr(),
            bias_ptr,
            c.as_mut_ptr(),
            m as i64,
            n as i64,
            k as i64,
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

fn activation_sizes(dtype: DType, m: usize, k: usize, group_k: usize) -> (usize, usize) {
    let cols = if dtype.bits() >= 8 { k } else { k.div_ceil(2) };
    let groups = if group_k == 0 { 1 } else { k.div_ceil(group_k) };
    (m * cols, m * groups)
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
    require("a", a.len(), m * k)?;
    let (codes, scales) = activation_sizes(dtype, m, k, group_k);
    let mut out = QuantizedActivation { codes: vec![0; codes], scales: vec![0.0; scales] };
    check(unsafe {
        sys::hm_quantize_activation(
            dtype.0,
            a.as_ptr(),
            m as i64,
            k as i64,
            group_k as i32,
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
    let (codes, scales) = activation_sizes(dtype, m, k, group_k);
    require("codes", q.codes.len(), codes)?;
    require("scales", q.scales.len(), scales)?;
    let mut out = vec![0f32; m * k];
    check(unsafe {
        sys::hm_dequantize_activation(
            dtype.0,
            q.codes.as_ptr().cast(),
            q.scales.as_ptr(),
            m as i64,
            k as i64,
            group_k as i32,
            out.as_mut_ptr(),
        )
    })?;
    Ok(out)
}
