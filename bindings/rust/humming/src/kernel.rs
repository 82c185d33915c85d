//! Launch parameters and compiled kernels.
use std::ptr::NonNull;

use crate::context::{Context, DeviceMemory, DevicePtr, Stream};
use crate::dtype::DType;
use crate::error::{check, copy_out, Error, Result};
use crate::sys;

/// A launch-parameter slot (`HM_ARG_*`): pointer slots below [`Slot::M`], integers from it.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub struct Slot(pub i32);

impl Slot {
    pub const A: Slot = Slot(sys::HM_ARG_A);
    pub const B: Slot = Slot(sys::HM_ARG_B);
    pub const C: Slot = Slot(sys::HM_ARG_C);
    pub const BIAS: Slot = Slot(sys::HM_ARG_BIAS);
    pub const SCALES: Slot = Slot(sys::HM_ARG_SCALES);
    pub const ZEROS: Slot = Slot(sys::HM_ARG_ZEROS);
    pub const GLOBAL: Slot = Slot(sys::HM_ARG_GLOBAL);
    pub const WORKSPACE: Slot = Slot(sys::HM_ARG_WORKSPACE);
    pub const SORTED_IDS: Slot = Slot(sys::HM_ARG_SORTED_IDS);
    pub const EXPERT_IDS: Slot = Slot(sys::HM_ARG_EXPERT_IDS);
    pub const NUM_TOKENS_PADDED: Slot = Slot(sys::HM_ARG_NUM_TOKENS_PADDED);
    pub const ACT_SCALES: Slot = Slot(sys::HM_ARG_ACT_SCALES);
    pub const EXPERT_OFFSETS: Slot = Slot(sys::HM_ARG_EXPERT_OFFSETS);
    pub const MASKED_M: Slot = Slot(sys::HM_ARG_MASKED_M);
    pub const M: Slot = Slot(sys::HM_ARG_M);
    pub const N: Slot = Slot(sys::HM_ARG_N);
    pub const K: Slot = Slot(sys::HM_ARG_K);
    pub const WORKSPACE_BYTES: Slot = Slot(sys::HM_ARG_WORKSPACE_BYTES);
    pub const TOP_K: Slot = Slot(sys::HM_ARG_TOP_K);
    /// The MoE mode of a call: `HM_MOE_MODE_*` (humming-sys), 0 (indexed) by default.
    pub const MOE_MODE: Slot = Slot(sys::HM_ARG_MOE_MODE);
}

/// Arguments of a launch, by slot. The header says launch params are not thread-safe: this is
/// `Send` (move it to another thread) but not `Sync` (never share one); use one per thread.
pub struct LaunchParams {
    raw: NonNull<sys::hm_launch_params_t>,
}

unsafe impl Send for LaunchParams {}

impl Drop for LaunchParams {
    fn drop(&mut self) {
        unsafe { sys::hm_launch_params_destroy(self.raw.as_ptr()) }
    }
}

impl LaunchParams {
    pub fn new() -> Result<LaunchParams> {
        let mut raw = std::ptr::null_mut();
        check(unsafe { sys::hm_launch_params_create(&mut raw) })?;
        let raw = NonNull::new(raw).ok_or_else(|| {
            Error::new(sys::HM_ERROR_INTERNAL, "the library returned NULL params")
        })?;
        Ok(LaunchParams { raw })
    }

    pub fn as_raw(&self) -> *const sys::hm_launch_params_t {
        self.raw.as_ptr()
    }

    pub fn set_pointer(&mut self, slot: Slot, ptr: DevicePtr) -> Result<&mut Self> {
        check(unsafe { sys::hm_launch_params_set_pointer(self.raw.as_ptr(), slot.0, ptr.0) })?;
        Ok(self)
    }

    pub fn set_int(&mut self, slot: Slot, value: i64) -> Result<&mut Self> {
        check(unsafe { sys::hm_launch_params_set_int(self.raw.as_ptr(), slot.0, value) })?;
        Ok(self)
    }

    /// Resets every slot to 0.
    pub fn clear(&mut self) -> Result<&mut Self> {
        check(unsafe { sys::hm_launch_params_clear(self.raw.as_ptr()) })?;
        Ok(self)
    }
}

/// One compiled kernel (today: the reference GEMM). `Send + Sync`, like its context; it keeps
/// the context's state alive.
pub struct Kernel {
    raw: NonNull<sys::hm_kernel_t>,
    in_dtype: DType,
    out_dtype: DType,
}

unsafe impl Send for Kernel {}
unsafe impl Sync for Kernel {}

impl Drop for Kernel {
    fn drop(&mut self) {
        unsafe { sys::hm_kernel_destroy(self.raw.as_ptr()) }
    }
}

fn require_bytes(name: &str, have: usize, need: usize) -> Result<()> {
    if have < need {
        return Err(Error::invalid(format!(
            "'{name}' has {have} bytes of device memory, needs {need}"
        )));
    }
    Ok(())
}

impl Context {
    /// The reference GEMM `C[M,N] = A[M,K] * B[N,K]^T` for in_dtype (A and B) and out_dtype,
    /// each F16, BF16 or F32; compiled (or loaded) through the cache.
    pub fn reference_gemm_kernel(&self, in_dtype: DType, out_dtype: DType) -> Result<Kernel> {
        let mut raw = std::ptr::null_mut();
        check(unsafe {
            sys::hm_kernel_create_reference_gemm(self.as_raw(), in_dtype.0, out_dtype.0, &mut raw)
        })?;
        let raw = NonNull::new(raw).ok_or_else(|| {
            Error::new(sys::HM_ERROR_INTERNAL, "the library returned a NULL kernel")
        })?;
        Ok(Kernel { raw, in_dtype, out_dtype })
    }
}

impl Kernel {
    pub fn name(&self) -> Result<String> {
        copy_out(|buf, size, length| unsafe {
            sys::hm_kernel_name(self.raw.as_ptr(), buf, size, length)
        })
    }

    /// The cache key (hex), for logs.
    pub fn cache_key(&self) -> Result<String> {
        copy_out(|buf, size, length| unsafe {
            sys::hm_kernel_cache_key(self.raw.as_ptr(), buf, size, length)
        })
    }

    /// Launches with raw parameters (asynchronous).
    ///
    /// # Safety
    /// Every pointer in `params` must address device memory of the right size for the M, N, K
    /// set there, live until the kernel has finished on `stream`.
    pub unsafe fn launch(&self, params: &LaunchParams, stream: Stream) -> Result<()> {
        check(sys::hm_kernel_launch(self.raw.as_ptr(), params.as_raw(), stream.as_raw()))
    }

    /// `C[M,N] = A[M,K] * B[N,K]^T` on `stream`, with the buffer sizes checked against M, N, K
    /// and the kernel's dtypes. Asynchronous: synchronize before reading C.
    #[allow(clippy::too_many_arguments)] // the GEMM's own parameters, each named
    pub fn gemm(
        &self,
        params: &mut LaunchParams,
        a: &dyn DeviceMemory,
        b: &dyn DeviceMemory,
        c: &mut dyn DeviceMemory,
        m: usize,
        n: usize,
        k: usize,
        stream: Stream,
    ) -> Result<()> {
        require_bytes("a", a.byte_len(), m * k * self.in_dtype.bytes())?;
        require_bytes("b", b.byte_len(), n * k * self.in_dtype.bytes())?;
        require_bytes("c", c.byte_len(), m * n * self.out_dtype.bytes())?;
        params.clear()?;
        params
            .set_pointer(Slot::A, a.device_ptr())?
            .set_pointer(Slot::B, b.device_ptr())?
            .set_pointer(Slot::C, c.device_ptr())?;
        params
            .set_int(Slot::M, m as i64)?
            .set_int(Slot::N, n as i64)?
            .set_int(Slot::K, k as i64)?;
        unsafe { self.launch(params, stream) }
    }
}

impl std::fmt::Debug for Kernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Kernel({})", self.name().unwrap_or_default())
    }
}

impl std::fmt::Debug for LaunchParams {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LaunchParams")
    }
}
