//! Safe Rust API for Humming, JIT-compiled GEMM kernels for quantized inference.
//!
//! Owned handles free themselves on drop; every fallible call returns [`Result`] whose
//! [`Error`] carries the status code and the library's message; host buffers are slices;
//! device memory is [`DeviceBuffer`] (ours) or [`DeviceView`] (another library's), addresses
//! are [`DevicePtr`]. `Send`/`Sync` follow what `humming.h` promises: formats, contexts,
//! kernels and prepared plans may be shared between threads; launch parameters may not.
//! The raw C API is re-exported as [`sys`].
//!
//! ```no_run
//! use humming::{Context, Format, Plan, PlanOptions, LaunchParams, GemmArgs, Stream};
//! # fn main() -> humming::Result<()> {
//! let format = Format::parse("w=uint4b8 a=f16 c=f16 s=f16:g128 n=256 k=512")?;
//! let packed = format.pack(&format.quantize(&vec![0.5f32; 256 * 512])?)?;
//! let ctx = Context::new(0)?;
//! let mut plan = Plan::new(&ctx, &format, &PlanOptions { max_m: 16, ..Default::default() })?;
//! plan.prepare()?;
//! # Ok(()) }
//! ```
pub use humming_sys as sys;

mod context;
mod convert;
mod dtype;
mod error;
mod format;
mod kernel;
mod moe;
mod pack;
mod plan;
mod quant;
mod stored;

pub use context::{
    cache_prune, runtime_info, CachePruned, Compiler, Context, ContextOptions, DeviceBuffer, DeviceInfo, DeviceMemory,
    DevicePtr, DeviceView, HostData, RuntimeInfo, Stream,
};
pub use convert::{
    convert_file, convert_layer, convert_model, scheme_parse, stack_layers, CheckpointTensor,
    ConvertModelOptions, ConvertModelSummary, ConvertOptions, ConvertedLayer, ModelEvent,
    ModelProgress, StackAxis,
};
pub use dtype::DType;
pub use error::{clear_last_error, last_error_message, status_name, Error, Result};
pub use format::{
    support_matrix, CanonicalSizes, CanonicalWeight, Format, PackedSizes, PackedWeight, Role, Scale,
};
pub use kernel::{Kernel, LaunchParams, Slot};
pub use moe::{moe_align, moe_align_sizes, moe_reduce, MoeAlignOut, MoeAlignSizes, MoeRouting};
pub use pack::{pack_device, DeviceCanonical, DevicePacked};
pub use plan::{GemmArgs, MoeRoutingBuffers, Plan, PlanOptions};
pub use quant::{
    activation_scale_groups, dequantize_activation, quantize_activation,
    quantize_activation_device, reference_gemm_f32, DeviceActivation, QuantizedActivation,
};
pub use stored::{StoredLayer, StoredModel};

/// The loaded library's version as (major, minor, patch); compare with the header's.
pub fn version() -> (u32, u32, u32) {
    let v = unsafe { sys::hm_version() };
    (v / 10000, v / 100 % 100, v % 100)
}

/// "0.1.0".
pub fn version_string() -> &'static str {
    unsafe { std::ffi::CStr::from_ptr(sys::hm_version_string()) }.to_str().unwrap_or("?")
}

/// The ABI major of the loaded library (the SONAME suffix).
pub fn abi_version() -> u32 {
    unsafe { sys::hm_abi_version() }
}
