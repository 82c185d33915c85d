//! Layer formats and the host paths that use them: quantize, dequantize, pack, unpack.
use std::fmt;
use std::ptr::NonNull;
use std::str::FromStr;

use crate::dtype::DType;
use crate::error::{c_string, check, copy_out, Error, Result};
use crate::sys;

/// The role a dtype plays in a format (`HM_ROLE_*`).
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub struct Role(pub i32);

impl Role {
    pub const WEIGHT: Role = Role(sys::HM_ROLE_WEIGHT);
    pub const ACTIVATION: Role = Role(sys::HM_ROLE_ACTIVATION);
    pub const OUTPUT: Role = Role(sys::HM_ROLE_OUTPUT);
    pub const SCALE: Role = Role(sys::HM_ROLE_SCALE);
    pub const ZERO_POINT: Role = Role(sys::HM_ROLE_ZERO_POINT);
    pub const ACCUMULATOR: Role = Role(sys::HM_ROLE_ACCUMULATOR);
}

/// How weight scales are laid out (`HM_SCALE_*`), with the group sizes that apply.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub struct Scale {
    pub kind: i32,
    pub group_k: i32,
    pub group_n: i32,
}

/// Element counts of the canonical buffers of a format (0 where the format has none).
#[derive(Copy, Clone, PartialEq, Eq, Debug, Default)]
pub struct CanonicalSizes {
    pub codes: usize,
    pub scales: usize,
    pub zero_points: usize,
    pub global_scale: usize,
}

/// Byte sizes of the standard-layout buffers, and N and K after padding.
#[derive(Copy, Clone, PartialEq, Eq, Debug, Default)]
pub struct PackedSizes {
    pub weight: usize,
    pub scales: usize,
    pub zero_points: usize,
    pub global_scale: usize,
    pub n_padded: i64,
    pub k_padded: i64,
}

/// Canonical (unpacked) quantized weights on the host; empty vectors where the format has none.
#[derive(Clone, PartialEq, Debug, Default)]
pub struct CanonicalWeight {
    pub codes: Vec<u8>,
    pub scales: Vec<f32>,
    pub zero_points: Vec<f32>,
    pub global_scale: Vec<f32>,
}

/// Standard-layout buffers on the host, as bytes (the global scales as f32).
#[derive(Clone, PartialEq, Debug, Default)]
pub struct PackedWeight {
    pub weight: Vec<u8>,
    pub scales: Vec<u8>,
    pub zero_points: Vec<u8>,
    pub global_scale: Vec<f32>,
}

/// One linear (or MoE) layer: `C[M,N] = A[M,K] * dequant(W)[N,K]^T (+ bias)`.
///
/// Parse one from its canonical string (`"w=int4 a=f16 n=4096 k=4096"`, docs/format.md) and
/// print it with `Display`. The header promises a format may be read from several threads at
/// once, so it is `Send + Sync`; changing one takes `&mut self`.
pub struct Format {
    raw: NonNull<sys::hm_format_t>,
}

unsafe impl Send for Format {}
unsafe impl Sync for Format {}

impl Drop for Format {
    fn drop(&mut self) {
        unsafe { sys::hm_format_destroy(self.raw.as_ptr()) }
    }
}

fn adopt(raw: *mut sys::hm_format_t) -> Result<Format> {
    NonNull::new(raw)
        .map(|raw| Format { raw })
        .ok_or_else(|| Error::new(sys::HM_ERROR_INTERNAL, "the library returned a NULL format"))
}

/// A slice's length checked against what the format needs, with an error naming the field.
fn require_len(name: &str, len: usize, needed: usize) -> Result<()> {
    if len != needed {
        return Err(Error::invalid(format!(
            "'{name}' has {len} elements, this format needs {needed}"
        )));
    }
    Ok(())
}

fn ptr_or_null<T>(v: &[T]) -> *const T {
    if v.is_empty() {
        std::ptr::null()
    } else {
        v.as_ptr()
    }
}

fn mut_ptr_or_null<T>(v: &mut [T]) -> *mut T {
    if v.is_empty() {
        std::ptr::null_mut()
    } else {
        v.as_mut_ptr()
    }
}

impl Format {
    /// The default format `"w=uint4b8 a=f16 c=f16 s=f16:g128 n=0 k=0"`; set the shape.
    pub fn new() -> Result<Format> {
        let mut raw = std::ptr::null_mut();
        check(unsafe { sys::hm_format_create(&mut raw) })?;
        adopt(raw)
    }

    pub fn parse(text: &str) -> Result<Format> {
        let text = c_string(text, "text")?;
        let mut raw = std::ptr::null_mut();
        check(unsafe { sys::hm_format_parse(text.as_ptr(), &mut raw) })?;
        adopt(raw)
    }

    pub fn try_clone(&self) -> Result<Format> {
        let mut raw = std::ptr::null_mut();
        check(unsafe { sys::hm_format_clone(self.raw.as_ptr(), &mut raw) })?;
        adopt(raw)
    }

    /// The raw handle, for calls through [`crate::sys`]; it stays owned by `self`.
    pub fn as_raw(&self) -> *const sys::hm_format_t {
        self.raw.as_ptr()
    }

    pub fn to_text(&self) -> Result<String> {
        copy_out(|buf, size, length| unsafe {
            sys::hm_format_to_string(self.raw.as_ptr(), buf, size, length)
        })
    }

    pub fn dtype(&self, role: Role) -> Result<DType> {
        let mut code = 0;
        check(unsafe { sys::hm_format_get_dtype(self.raw.as_ptr(), role.0, &mut code) })?;
        Ok(DType(code))
    }

    pub fn set_dtype(&mut self, role: Role, dtype: DType) -> Result<()> {
        check(unsafe { sys::hm_format_set_dtype(self.raw.as_ptr(), role.0, dtype.0) })
    }

    pub fn scale(&self) -> Result<Scale> {
        let (mut kind, mut group_k, mut group_n) = (0, 0, 0);
        check(unsafe {
            sys::hm_format_get_scale(self.raw.as_ptr(), &mut kind, &mut group_k, &mut group_n)
        })?;
        Ok(Scale { kind, group_k, group_n })
    }

    /// `kind` is an `HM_SCALE_*` constant; group_k / group_n as the header describes (0 if unused).
    pub fn set_scale(&mut self, kind: i32, group_k: i32, group_n: i32) -> Result<()> {
        check(unsafe { sys::hm_format_set_scale(self.raw.as_ptr(), kind, group_k, group_n) })
    }

    /// (n, k, experts).
    pub fn shape(&self) -> Result<(i64, i64, i32)> {
        let (mut n, mut k, mut e) = (0, 0, 0);
        check(unsafe { sys::hm_format_get_shape(self.raw.as_ptr(), &mut n, &mut k, &mut e) })?;
        Ok((n, k, e))
    }

    pub fn set_shape(&mut self, n: i64, k: i64, experts: i32) -> Result<()> {
        check(unsafe { sys::hm_format_set_shape(self.raw.as_ptr(), n, k, experts) })
    }

    pub fn bias(&self) -> Result<bool> {
        let mut has = 0;
        check(unsafe { sys::hm_format_get_bias(self.raw.as_ptr(), &mut has) })?;
        Ok(has != 0)
    }

    pub fn set_bias(&mut self, has_bias: bool) -> Result<()> {
        check(unsafe { sys::hm_format_set_bias(self.raw.as_ptr(), has_bias as i32) })
    }

    /// The K group of the activation scales: 0 for one f32 scale per token (`[M]`), else one per
    /// token and `group_k` inputs (`[M][ceil(K / group_k)]`, "a=e4m3:g128").
    pub fn activation_groups(&self) -> Result<i32> {
        let mut group_k = 0;
        check(unsafe { sys::hm_format_get_activation_groups(self.raw.as_ptr(), &mut group_k) })?;
        Ok(group_k)
    }

    /// `group_k` 0: one scale per token; > 0: one per token and K group (see the header).
    pub fn set_activation_groups(&mut self, group_k: i32) -> Result<()> {
        check(unsafe { sys::hm_format_set_activation_groups(self.raw.as_ptr(), group_k) })
    }

    /// Checks the support rules for `arch` ("sm_90a", ...) or, with `None`, for any arch.
    pub fn validate(&self, arch: Option<&str>) -> Result<()> {
        let arch = arch.map(|a| c_string(a, "arch")).transpose()?;
        let ptr = arch.as_ref().map_or(std::ptr::null(), |a| a.as_ptr());
        check(unsafe { sys::hm_format_validate(self.raw.as_ptr(), ptr) })
    }

    /// The kernel families that run the format on `arch` (any target with `None`), e.g.
    /// `["dense_wgmma", "dense_mma"]`. A valid format that no kernel runs yet is an error
    /// with status `HM_ERROR_UNSUPPORTED` saying what is missing (the formats `Plan::new` refuses).
    pub fn kernels(&self, arch: Option<&str>) -> Result<Vec<String>> {
        let arch = arch.map(|a| c_string(a, "arch")).transpose()?;
        let ptr = arch.as_ref().map_or(std::ptr::null(), |a| a.as_ptr());
        let names = copy_out(|buf, size, length| unsafe {
            sys::hm_format_kernels(self.raw.as_ptr(), ptr, buf, size, length)
        })?;
        Ok(names.split_whitespace().map(str::to_owned).collect())
    }

    pub fn canonical_sizes(&self) -> Result<CanonicalSizes> {
        let mut s: sys::hm_canonical_sizes_t = unsafe { std::mem::zeroed() };
        unsafe { sys::hm_canonical_sizes_init_sized(&mut s, std::mem::size_of_val(&s)) };
        check(unsafe { sys::hm_format_canonical_sizes(self.raw.as_ptr(), &mut s) })?;
        Ok(CanonicalSizes {
            codes: s.codes as usize,
            scales: s.scales as usize,
            zero_points: s.zero_points as usize,
            global_scale: s.global_scale as usize,
        })
    }

    pub fn packed_sizes(&self) -> Result<PackedSizes> {
        let mut s: sys::hm_packed_sizes_t = unsafe { std::mem::zeroed() };
        unsafe { sys::hm_packed_sizes_init_sized(&mut s, std::mem::size_of_val(&s)) };
        check(unsafe { sys::hm_format_packed_sizes(self.raw.as_ptr(), &mut s) })?;
        Ok(PackedSizes {
            weight: s.weight as usize,
            scales: s.scales as usize,
            zero_points: s.zero_points as usize,
            global_scale: s.global_scale as usize,
            n_padded: s.n_padded,
            k_padded: s.k_padded,
        })
    }

    /// Zeroed canonical buffers of the right sizes.
    pub fn empty_canonical(&self) -> Result<CanonicalWeight> {
        let s = self.canonical_sizes()?;
        Ok(CanonicalWeight {
            codes: vec![0; s.codes],
            scales: vec![0.0; s.scales],
            zero_points: vec![0.0; s.zero_points],
            global_scale: vec![0.0; s.global_scale],
        })
    }

    /// Zeroed standard-layout buffers of the right sizes.
    pub fn empty_packed(&self) -> Result<PackedWeight> {
        let s = self.packed_sizes()?;
        Ok(PackedWeight {
            weight: vec![0; s.weight],
            scales: vec![0; s.scales],
            zero_points: vec![0; s.zero_points],
            global_scale: vec![0.0; s.global_scale / 4],
        })
    }

    fn check_canonical(&self, w: &CanonicalWeight) -> Result<()> {
        let s = self.canonical_sizes()?;
        require_len("codes", w.codes.len(), s.codes)?;
        require_len("scales", w.scales.len(), s.scales)?;
        require_len("zero_points", w.zero_points.len(), s.zero_points)?;
        require_len("global_scale", w.global_scale.len(), s.global_scale)
    }

    fn check_packed(&self, w: &PackedWeight) -> Result<()> {
        let s = self.packed_sizes()?;
        require_len("weight", w.weight.len(), s.weight)?;
        require_len("scales", w.scales.len(), s.scales)?;
        require_len("zero_points", w.zero_points.len(), s.zero_points)?;
        require_len("global_scale", w.global_scale.len() * 4, s.global_scale)
    }

    fn canonical_struct(w: &mut CanonicalWeight) -> sys::hm_canonical_weight_t {
        let mut s: sys::hm_canonical_weight_t = unsafe { std::mem::zeroed() };
        unsafe { sys::hm_canonical_weight_init_sized(&mut s, std::mem::size_of_val(&s)) };
        s.codes = mut_ptr_or_null(&mut w.codes);
        s.scales = mut_ptr_or_null(&mut w.scales);
        s.zero_points = mut_ptr_or_null(&mut w.zero_points);
        s.global_scale = mut_ptr_or_null(&mut w.global_scale);
        s
    }

    // The C struct has mutable pointers; for inputs the library only reads through them.
    fn canonical_struct_const(w: &CanonicalWeight) -> sys::hm_canonical_weight_t {
        let mut s: sys::hm_canonical_weight_t = unsafe { std::mem::zeroed() };
        unsafe { sys::hm_canonical_weight_init_sized(&mut s, std::mem::size_of_val(&s)) };
        s.codes = ptr_or_null(&w.codes) as *mut u8;
        s.scales = ptr_or_null(&w.scales) as *mut f32;
        s.zero_points = ptr_or_null(&w.zero_points) as *mut f32;
        s.global_scale = ptr_or_null(&w.global_scale) as *mut f32;
        s
    }

    fn packed_struct(w: &mut PackedWeight) -> sys::hm_packed_weight_t {
        let mut s: sys::hm_packed_weight_t = unsafe { std::mem::zeroed() };
        unsafe { sys::hm_packed_weight_init_sized(&mut s, std::mem::size_of_val(&s)) };
        s.weight = mut_ptr_or_null(&mut w.weight).cast();
        s.scales = mut_ptr_or_null(&mut w.scales).cast();
        s.zero_points = mut_ptr_or_null(&mut w.zero_points).cast();
        s.global_scale = mut_ptr_or_null(&mut w.global_scale);
        s
    }

    fn packed_struct_const(w: &PackedWeight) -> sys::hm_packed_weight_t {
        let mut s: sys::hm_packed_weight_t = unsafe { std::mem::zeroed() };
        unsafe { sys::hm_packed_weight_init_sized(&mut s, std::mem::size_of_val(&s)) };
        s.weight = ptr_or_null(&w.weight) as *mut std::ffi::c_void;
        s.scales = ptr_or_null(&w.scales) as *mut std::ffi::c_void;
        s.zero_points = ptr_or_null(&w.zero_points) as *mut std::ffi::c_void;
        s.global_scale = ptr_or_null(&w.global_scale) as *mut f32;
        s
    }

    fn weight_elements(&self) -> Result<usize> {
        let (n, k, e) = self.shape()?;
        Ok((n * k) as usize * e as usize)
    }

    /// Quantizes a row-major f32 weight `[E][N][K]` into new canonical buffers.
    pub fn quantize(&self, weight: &[f32]) -> Result<CanonicalWeight> {
        self.quantize_raw(weight.as_ptr().cast(), weight.len(), DType::F32)
    }

    /// Quantizes a row-major weight of f16 or bf16 bit patterns (`dtype` says which).
    pub fn quantize_bits16(&self, weight: &[u16], dtype: DType) -> Result<CanonicalWeight> {
        if dtype != DType::F16 && dtype != DType::BF16 {
            return Err(Error::invalid(format!(
                "'dtype' is {dtype}; 16-bit weights are f16 or bf16"
            )));
        }
        self.quantize_raw(weight.as_ptr().cast(), weight.len(), dtype)
    }

    fn quantize_raw(
        &self,
        weight: *const std::ffi::c_void,
        len: usize,
        dtype: DType,
    ) -> Result<CanonicalWeight> {
        require_len("weight", len, self.weight_elements()?)?;
        let mut out = self.empty_canonical()?;
        let s = Self::canonical_struct(&mut out);
        check(unsafe { sys::hm_quantize(self.raw.as_ptr(), weight, dtype.0, &s) })?;
        Ok(out)
    }

    /// Canonical buffers back to a row-major f32 weight `[E][N][K]`.
    pub fn dequantize(&self, w: &CanonicalWeight) -> Result<Vec<f32>> {
        self.check_canonical(w)?;
        let mut out = vec![0f32; self.weight_elements()?];
        let s = Self::canonical_struct_const(w);
        check(unsafe { sys::hm_dequantize(self.raw.as_ptr(), &s, out.as_mut_ptr()) })?;
        Ok(out)
    }

    /// Canonical buffers to the standard layout (exactly invertible by [`Format::unpack`]).
    pub fn pack(&self, w: &CanonicalWeight) -> Result<PackedWeight> {
        self.check_canonical(w)?;
        let mut out = self.empty_packed()?;
        let src = Self::canonical_struct_const(w);
        let dst = Self::packed_struct(&mut out);
        check(unsafe { sys::hm_pack(self.raw.as_ptr(), &src, &dst) })?;
        Ok(out)
    }

    pub fn unpack(&self, w: &PackedWeight) -> Result<CanonicalWeight> {
        self.check_packed(w)?;
        let src = Self::packed_struct_const(w);
        let mut out = self.empty_canonical()?;
        let dst = Self::canonical_struct(&mut out);
        check(unsafe { sys::hm_unpack(self.raw.as_ptr(), &src, &dst) })?;
        Ok(out)
    }
}

impl Clone for Format {
    /// Panics only when the library cannot allocate; use `try_clone` to handle that.
    fn clone(&self) -> Format {
        self.try_clone().expect("hm_format_clone failed")
    }
}

impl PartialEq for Format {
    fn eq(&self, other: &Format) -> bool {
        unsafe { sys::hm_format_equal(self.raw.as_ptr(), other.raw.as_ptr()) == 1 }
    }
}

impl FromStr for Format {
    type Err = Error;
    fn from_str(s: &str) -> Result<Format> {
        Format::parse(s)
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_text().map_err(|_| fmt::Error)?)
    }
}

impl fmt::Debug for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Format({:?})", self.to_text().unwrap_or_default())
    }
}

/// The support matrix as text (what `humming support` prints).
pub fn support_matrix() -> Result<String> {
    copy_out(|buf, size, length| unsafe { sys::hm_support_matrix(buf, size, length) })
}
