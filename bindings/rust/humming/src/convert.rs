//! Checkpoint conversion: one layer's tensors as the producing tool wrote them -> a format plus
//! canonical buffers (then [`Format::pack`]), or a whole safetensors file -> the standard layout.
use std::ffi::{c_char, c_void, CStr, CString};
use std::path::Path;
use std::ptr::NonNull;

use crate::error::{c_string, check, Error, Result};
use crate::format::{CanonicalWeight, Format};
use crate::sys;

/// Parses a scheme name ("gptq", "awq", "ct-fp8", ...) into its `HM_SCHEME_*` constant.
pub fn scheme_parse(name: &str) -> Result<i32> {
    let text = c_string(name, "name")?;
    let mut scheme = 0;
    check(unsafe { sys::hm_scheme_parse(text.as_ptr(), &mut scheme) })?;
    Ok(scheme)
}

/// One checkpoint tensor in host memory: its name ("qweight", or a full name), safetensors
/// dtype ("I32", "F16", "F8_E4M3", ...), shape, and row-major little-endian bytes.
#[derive(Clone, Debug)]
pub struct CheckpointTensor<'a> {
    pub name: &'a str,
    pub dtype: &'a str,
    pub shape: Vec<i64>,
    pub data: &'a [u8],
}

/// Options of a conversion (`hm_convert_options_t`); the defaults let the scheme decide.
#[derive(Clone, Debug, Default)]
pub struct ConvertOptions {
    pub activation: crate::DType,
    pub output: crate::DType,
    pub bits: i32,
    pub group_size: i32,
    /// `HM_CONVERT_*` bits.
    pub flags: u32,
    /// `HM_GLOBAL_SCALE_*`.
    pub global_scale_convention: i32,
    pub shard_rows: Vec<i64>,
}

impl ConvertOptions {
    fn raw(&self) -> sys::hm_convert_options_t {
        let mut o: sys::hm_convert_options_t = unsafe { std::mem::zeroed() };
        unsafe { sys::hm_convert_options_init_sized(&mut o, std::mem::size_of_val(&o)) };
        o.activation = self.activation.0;
        o.output = self.output.0;
        o.bits = self.bits;
        o.group_size = self.group_size;
        o.flags = self.flags;
        o.global_scale_convention = self.global_scale_convention;
        if !self.shard_rows.is_empty() {
            o.shard_rows = self.shard_rows.as_ptr();
            o.shard_count = self.shard_rows.len() as i32;
        }
        o
    }
}

/// A converted layer, with host copies of what the library returned. The header makes no
/// thread-safety promise for it, so it is `Send` but not `Sync`.
pub struct ConvertedLayer {
    raw: NonNull<sys::hm_converted_layer_t>,
    /// The canonical buffers (pass them to [`Format::pack`] with [`ConvertedLayer::format`]).
    pub canonical: CanonicalWeight,
    /// f32 `[E][N]`, empty when the format has no bias.
    pub bias: Vec<f32>,
    /// int32 `[K]`, empty when K keeps its order; else gather the activations with it:
    /// `A'[:, k] = A[:, k_permutation[k]]`.
    pub k_permutation: Vec<i32>,
    /// What the conversion lost (e.g. MXFP4 scale groups below the exponent window of 8-bit
    /// activations, whose codes were re-rounded), one sentence; `None` when nothing.
    pub note: Option<String>,
}

unsafe impl Send for ConvertedLayer {}

impl Drop for ConvertedLayer {
    fn drop(&mut self) {
        unsafe { sys::hm_converted_layer_destroy(self.raw.as_ptr()) }
    }
}

/// `count` values at `ptr` (the library's buffer) as a Vec; empty for NULL or 0.
pub(crate) unsafe fn copy<T: Copy>(ptr: *const T, count: usize) -> Vec<T> {
    if ptr.is_null() || count == 0 {
        Vec::new()
    } else {
        std::slice::from_raw_parts(ptr, count).to_vec()
    }
}

impl ConvertedLayer {
    /// A new copy of the layer's format.
    pub fn format(&self) -> Result<Format> {
        let mut raw = std::ptr::null_mut();
        check(unsafe { sys::hm_converted_layer_format(self.raw.as_ptr(), &mut raw) })?;
        // The library hands over a format we own: wrap it through a clone of its text.
        let text = crate::error::copy_out(|buf, size, length| unsafe {
            sys::hm_format_to_string(raw, buf, size, length)
        });
        unsafe { sys::hm_format_destroy(raw) };
        Format::parse(&text?)
    }
}

/// Converts one layer from its checkpoint tensors.
pub fn convert_layer(
    scheme: i32,
    tensors: &[CheckpointTensor],
    options: &ConvertOptions,
) -> Result<ConvertedLayer> {
    let mut names = Vec::with_capacity(tensors.len());
    let mut raws = Vec::with_capacity(tensors.len());
    for t in tensors {
        if t.shape.len() > 8 {
            return Err(Error::invalid(format!(
                "tensor '{}' has {} dimensions; at most 8",
                t.name,
                t.shape.len()
            )));
        }
        let name = c_string(t.name, "name")?;
        let dtype = c_string(t.dtype, "dtype")?;
        let mut r: sys::hm_checkpoint_tensor_t = unsafe { std::mem::zeroed() };
        unsafe { sys::hm_checkpoint_tensor_init_sized(&mut r, std::mem::size_of_val(&r)) };
        r.name = name.as_ptr();
        r.dtype = dtype.as_ptr();
        r.shape[..t.shape.len()].copy_from_slice(&t.shape);
        r.ndim = t.shape.len() as i32;
        r.data = t.data.as_ptr().cast();
        r.bytes = t.data.len() as u64;
        names.push((name, dtype));
        raws.push(r);
    }
    let o = options.raw();
    let mut raw = std::ptr::null_mut();
    check(unsafe { sys::hm_convert_layer(scheme, raws.as_ptr(), raws.len(), &o, &mut raw) })?;
    drop(names);
    ConvertedLayer::from_raw(raw)
}

/// How [`stack_layers`] joins layers (docs/convert.md "Stacking experts").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StackAxis {
    /// The layers' experts in order (E = the sum of theirs): experts converted one by one into
    /// one MoE layer.
    Experts,
    /// Expert by expert, the layers' rows in order (N = the sum of theirs): gate and up into one
    /// gate_up layer.
    Rows,
}

/// Joins converted layers into one (`hm_converted_layer_stack`): they must share one format but
/// for E (or N) and one K permutation; nothing is re-quantized. The inputs are left as they are.
pub fn stack_layers(layers: &[&ConvertedLayer], axis: StackAxis) -> Result<ConvertedLayer> {
    let raws: Vec<*const sys::hm_converted_layer_t> =
        layers.iter().map(|l| l.raw.as_ptr() as *const _).collect();
    let axis = match axis {
        StackAxis::Experts => sys::HM_STACK_EXPERTS,
        StackAxis::Rows => sys::HM_STACK_ROWS,
    };
    let mut raw = std::ptr::null_mut();
    check(unsafe { sys::hm_converted_layer_stack(raws.as_ptr(), raws.len(), axis, &mut raw) })?;
    ConvertedLayer::from_raw(raw)
}

impl ConvertedLayer {
    /// Takes ownership of a layer the library made, copying out its canonical buffers.
    fn from_raw(raw: *mut sys::hm_converted_layer_t) -> Result<ConvertedLayer> {
        let raw = NonNull::new(raw).ok_or_else(|| {
            Error::new(sys::HM_ERROR_INTERNAL, "the library returned a NULL layer")
        })?;
        let mut layer = ConvertedLayer {
            raw,
            canonical: CanonicalWeight::default(),
            bias: Vec::new(),
            k_permutation: Vec::new(),
            note: None,
        };
        let format = layer.format()?;
        let sizes = format.canonical_sizes()?;
        let (n, k, e) = format.shape()?;
        let mut info: sys::hm_converted_layer_info_t = unsafe { std::mem::zeroed() };
        unsafe { sys::hm_converted_layer_info_init_sized(&mut info, std::mem::size_of_val(&info)) };
        check(unsafe { sys::hm_converted_layer_info(layer.raw.as_ptr(), &mut info) })?;
        unsafe {
            layer.canonical = CanonicalWeight {
                codes: copy(info.weight.codes, sizes.codes),
                scales: copy(info.weight.scales, sizes.scales),
                zero_points: copy(info.weight.zero_points, sizes.zero_points),
                global_scale: copy(info.weight.global_scale, sizes.global_scale),
            };
            layer.bias = copy(info.bias, (e as i64 * n) as usize);
            layer.k_permutation = copy(info.k_permutation, k as usize);
            if !info.note.is_null() {
                layer.note = Some(CStr::from_ptr(info.note).to_string_lossy().into_owned());
            }
        }
        Ok(layer)
    }
}

struct ProgressState<'a> {
    callback: &'a mut dyn FnMut(&str, u64, u64),
    // A panic of the callback: it cancels the conversion and is resumed once the call returns.
    panic: Option<Box<dyn std::any::Any + Send>>,
}

unsafe extern "C" fn cancel_trampoline(user: *mut c_void) -> i32 {
    let progress = &*(user as *const ProgressState);
    i32::from(progress.panic.is_some())
}

unsafe extern "C" fn progress_trampoline(
    user: *mut c_void,
    name: *const c_char,
    done: u64,
    total: u64,
) {
    let progress = &mut *(user as *mut ProgressState);
    let name = if name.is_null() {
        std::borrow::Cow::Borrowed("")
    } else {
        CStr::from_ptr(name).to_string_lossy()
    };
    // A panic must not unwind into C: it is kept, cancels the conversion (cancel_trampoline) and
    // is resumed by convert_file; later calls are skipped.
    if progress.panic.is_some() {
        return;
    }
    if let Err(payload) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        (progress.callback)(&name, done, total)
    })) {
        progress.panic = Some(payload);
    }
}

/// A progress callback: (tensor name, bytes done, bytes in all).
pub type Progress<'a> = &'a mut dyn FnMut(&str, u64, u64);

/// Converts every quantized layer of a safetensors file into the standard layout
/// (docs/convert.md). `progress` is called after each tensor written with (name, done, total);
/// a panic in it stops the conversion after the current layer (nothing is written to `output`)
/// and is resumed once the call has returned.
pub fn convert_file(
    scheme: &str,
    input: &Path,
    output: &Path,
    options: &ConvertOptions,
    progress: Option<Progress>,
) -> Result<()> {
    let path = |p: &Path, what: &str| -> Result<CString> {
        c_string(p.to_str().ok_or_else(|| Error::invalid(format!("'{what}' is not UTF-8")))?, what)
    };
    let (scheme, input, output) =
        (c_string(scheme, "scheme")?, path(input, "input")?, path(output, "output")?);
    let mut o = options.raw();
    let mut state = progress.map(|callback| ProgressState { callback, panic: None });
    if let Some(state) = state.as_mut() {
        let user: *mut c_void = (state as *mut ProgressState).cast();
        o.progress = Some(progress_trampoline);
        o.progress_user_data = user;
        o.cancel = Some(cancel_trampoline);
        o.cancel_user_data = user;
    }
    let status =
        check(unsafe { sys::hm_convert_file(scheme.as_ptr(), input.as_ptr(), output.as_ptr(), &o) });
    if let Some(payload) = state.and_then(|s| s.panic) {
        std::panic::resume_unwind(payload);
    }
    status
}

impl std::fmt::Debug for ConvertedLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ConvertedLayer({} codes)", self.canonical.codes.len())
    }
}

/// What a model-conversion progress call is about: `HM_CONVERT_EVENT_LAYER`, `_TENSOR`, `_FILE`.
pub type ModelEvent = i32;

/// A model progress callback: (event kind, name, detail, bytes done, bytes in all); returning
/// `true` cancels the conversion (nothing is written).
pub type ModelProgress<'a> = &'a mut dyn FnMut(ModelEvent, &str, Option<&str>, u64, u64) -> bool;

/// Options of [`convert_model`]; the defaults let the model's config decide everything.
#[derive(Clone, Debug, Default)]
pub struct ConvertModelOptions {
    /// Forces every layer's scheme ("gptq", ...); `None`: from the config.
    pub scheme: Option<String>,
    /// Overrides of the config's parameters, field by field (defaults leave it).
    pub layer: ConvertOptions,
    /// `HM_CONVERT_MODEL_*` bits.
    pub flags: u32,
    /// Layers converted at once; 0: every usable core.
    pub threads: i32,
}

/// What [`convert_model`] did (`hm_convert_model_summary_t`).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ConvertModelSummary {
    pub layers: i32,
    pub tensors: i32,
    pub files: i32,
    pub shards: i32,
    pub bytes_in: u64,
    pub bytes_out: u64,
    pub seconds: f64,
}

struct ModelProgressState<'a> {
    callback: ModelProgress<'a>,
}

unsafe extern "C" fn model_progress_trampoline(
    user: *mut c_void,
    kind: i32,
    name: *const c_char,
    detail: *const c_char,
    done: u64,
    total: u64,
) -> i32 {
    let progress = &mut *(user as *mut ModelProgressState);
    let text = |p: *const c_char| (!p.is_null()).then(|| CStr::from_ptr(p).to_string_lossy());
    let name = text(name).unwrap_or_default();
    let detail = text(detail);
    // A panic must not unwind into C: it cancels the conversion instead.
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        (progress.callback)(kind, &name, detail.as_deref(), done, total)
    })) {
        Ok(false) => 0,
        _ => 1,
    }
}

/// Converts a Hugging Face model folder into the standard layout (docs/convert.md): each
/// layer's scheme and parameters from its quantization config, written atomically to `output`.
pub fn convert_model(
    input: &Path,
    output: &Path,
    options: &ConvertModelOptions,
    progress: Option<ModelProgress>,
) -> Result<ConvertModelSummary> {
    let path = |p: &Path, what: &str| -> Result<CString> {
        c_string(p.to_str().ok_or_else(|| Error::invalid(format!("'{what}' is not UTF-8")))?, what)
    };
    let (input, output) = (path(input, "input")?, path(output, "output")?);
    let scheme = options.scheme.as_deref().map(|s| c_string(s, "scheme")).transpose()?;
    let layer = options.layer.raw();
    let mut o: sys::hm_convert_model_options_t = unsafe { std::mem::zeroed() };
    unsafe { sys::hm_convert_model_options_init_sized(&mut o, std::mem::size_of_val(&o)) };
    o.scheme = scheme.as_ref().map_or(std::ptr::null(), |s| s.as_ptr());
    o.layer_options = &layer;
    o.flags = options.flags;
    o.threads = options.threads;
    let mut state;
    if let Some(callback) = progress {
        state = ModelProgressState { callback };
        o.progress = Some(model_progress_trampoline);
        o.progress_user_data = (&mut state as *mut ModelProgressState).cast();
    }
    let mut s: sys::hm_convert_model_summary_t = unsafe { std::mem::zeroed() };
    unsafe { sys::hm_convert_model_summary_init_sized(&mut s, std::mem::size_of_val(&s)) };
    check(unsafe { sys::hm_convert_model(input.as_ptr(), output.as_ptr(), &o, &mut s) })?;
    Ok(ConvertModelSummary {
        layers: s.layers,
        tensors: s.tensors,
        files: s.files,
        shards: s.shards,
        bytes_in: s.bytes_in,
        bytes_out: s.bytes_out,
        seconds: s.seconds,
    })
}
