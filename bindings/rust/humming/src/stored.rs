//! Reading converted checkpoints back (`hm_stored_model_*`, docs/convert.md "Reading it back"):
//! a folder written by [`crate::convert_model`] or a file written by [`crate::convert_file`],
//! each converted layer as its [`Format`] and standard-layout [`PackedWeight`].

use std::ffi::CStr;
use std::path::Path;
use std::ptr::NonNull;

use crate::convert::copy;
use crate::error::{c_string, check, copy_out, Error, Result};
use crate::format::{Format, PackedWeight};
use crate::sys;

/// A converted layer as stored, with host copies of its buffers.
#[derive(Debug)]
pub struct StoredLayer {
    pub format: Format,
    /// The standard layout (sizes from [`Format::packed_sizes`]).
    pub packed: PackedWeight,
    /// f32 `[E][N]`, empty when the format has no bias.
    pub bias: Vec<f32>,
    /// int32 `[K]`, empty when K keeps its order; else gather the activations with it:
    /// `A'[:, k] = A[:, k_permutation[k]]`.
    pub k_permutation: Vec<i32>,
    /// What the conversion lost, one sentence; `None` when nothing.
    pub note: Option<String>,
}

/// A converted folder or file, opened: its shards are mapped read-only and only the layers
/// asked for are read. The header lets several threads read one model at once.
pub struct StoredModel {
    raw: NonNull<sys::hm_stored_model_t>,
    layers: Vec<String>,
}

unsafe impl Send for StoredModel {}
unsafe impl Sync for StoredModel {}

impl Drop for StoredModel {
    fn drop(&mut self) {
        unsafe { sys::hm_stored_model_destroy(self.raw.as_ptr()) }
    }
}

/// Takes a format the library made (ours to destroy) as a [`Format`], through its text.
fn format_of(fmt: *mut sys::hm_format_t) -> Result<Format> {
    let text =
        copy_out(|buf, size, length| unsafe { sys::hm_format_to_string(fmt, buf, size, length) });
    unsafe { sys::hm_format_destroy(fmt) };
    Format::parse(&text?)
}

impl StoredModel {
    pub fn open(path: &Path) -> Result<StoredModel> {
        let text = path.to_str().ok_or_else(|| Error::invalid("'path' is not UTF-8"))?;
        let path = c_string(text, "path")?;
        let mut raw = std::ptr::null_mut();
        check(unsafe { sys::hm_stored_model_open(path.as_ptr(), &mut raw) })?;
        let raw = NonNull::new(raw).ok_or_else(|| {
            Error::new(sys::HM_ERROR_INTERNAL, "the library returned a NULL model")
        })?;
        let mut model = StoredModel { raw, layers: Vec::new() };
        let mut count = 0usize;
        check(unsafe { sys::hm_stored_model_layer_count(raw.as_ptr(), &mut count) })?;
        for i in 0..count {
            let mut name = std::ptr::null();
            check(unsafe { sys::hm_stored_model_layer_name(raw.as_ptr(), i, &mut name) })?;
            let name = unsafe { CStr::from_ptr(name) }.to_string_lossy().into_owned();
            model.layers.push(name);
        }
        Ok(model)
    }

    /// The converted layers' names (prefixes), sorted.
    pub fn layers(&self) -> &[String] {
        &self.layers
    }

    /// The layer's format, from the header alone (no tensor is read).
    pub fn format(&self, name: &str) -> Result<Format> {
        let cname = c_string(name, "name")?;
        let mut fmt = std::ptr::null_mut();
        check(unsafe {
            sys::hm_stored_model_layer_format(self.raw.as_ptr(), cname.as_ptr(), &mut fmt)
        })?;
        format_of(fmt)
    }

    /// Reads one layer; an error names a missing layer or a tensor that does not fit its format.
    pub fn read(&self, name: &str) -> Result<StoredLayer> {
        let cname = c_string(name, "name")?;
        let mut raw = std::ptr::null_mut();
        check(unsafe { sys::hm_stored_model_read(self.raw.as_ptr(), cname.as_ptr(), &mut raw) })?;
        struct Owned(*mut sys::hm_stored_layer_t);
        impl Drop for Owned {
            fn drop(&mut self) {
                unsafe { sys::hm_stored_layer_destroy(self.0) }
            }
        }
        let layer = Owned(raw);
        let mut fmt = std::ptr::null_mut();
        check(unsafe { sys::hm_stored_layer_format(layer.0, &mut fmt) })?;
        let format = format_of(fmt)?;
        let sizes = format.packed_sizes()?;
        let (n, k, e) = format.shape()?;
        let mut info: sys::hm_stored_layer_info_t = unsafe { std::mem::zeroed() };
        unsafe { sys::hm_stored_layer_info_init_sized(&mut info, std::mem::size_of_val(&info)) };
        check(unsafe { sys::hm_stored_layer_info(layer.0, &mut info) })?;
        let p = &info.packed;
        unsafe {
            Ok(StoredLayer {
                packed: PackedWeight {
                    weight: copy(p.weight as *const u8, sizes.weight),
                    scales: copy(p.scales as *const u8, sizes.scales),
                    zero_points: copy(p.zero_points as *const u8, sizes.zero_points),
                    global_scale: copy(p.global_scale as *const f32, sizes.global_scale / 4),
                },
                bias: copy(info.bias, (e as i64 * n) as usize),
                k_permutation: copy(info.k_permutation, k as usize),
                note: (!info.note.is_null())
                    .then(|| CStr::from_ptr(info.note).to_string_lossy().into_owned()),
                format,
            })
        }
    }
}
