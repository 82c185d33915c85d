//! Packing on the device (`hm_pack_device`): canonical codes already in device memory -> the
//! standard layout, at load time without a round trip through the host.
use crate::context::{Context, DeviceMemory, Stream};
use crate::error::{check, Error, Result};
use crate::format::{Format, Role};
use crate::sys;

/// Canonical buffers in device memory. `codes` is one byte per code, `[E][N][K]`; `scales` and
/// `zero_points` hold the dtype's codes (not values) in canonical order `[E][R][G]`, one element
/// of the packed size each (1, 2 or 4 bytes, little-endian); `global_scale` is f32 `[E]`.
/// A side tensor the format has is packed only when it is given here and in [`DevicePacked`].
#[derive(Default)]
pub struct DeviceCanonical<'a> {
    pub codes: Option<&'a dyn DeviceMemory>,
    pub scales: Option<&'a dyn DeviceMemory>,
    pub zero_points: Option<&'a dyn DeviceMemory>,
    pub global_scale: Option<&'a dyn DeviceMemory>,
}

/// Standard-layout buffers in device memory, written by [`pack_device`].
#[derive(Default)]
pub struct DevicePacked<'a> {
    pub weight: Option<&'a mut dyn DeviceMemory>,
    pub scales: Option<&'a mut dyn DeviceMemory>,
    pub zero_points: Option<&'a mut dyn DeviceMemory>,
    pub global_scale: Option<&'a mut dyn DeviceMemory>,
}

fn sized(name: &str, buffer: Option<&dyn DeviceMemory>, need: usize) -> Result<u64> {
    match buffer {
        None => Ok(0),
        Some(_) if need == 0 => {
            Err(Error::invalid(format!("'{name}' was given, but the format has none")))
        }
        Some(b) if b.byte_len() < need => Err(Error::invalid(format!(
            "'{name}' has {} bytes of device memory, needs {need}",
            b.byte_len()
        ))),
        Some(b) => Ok(b.device_ptr().0),
    }
}

/// Packs `input` into `output` on `stream` (asynchronous: synchronize before reading). The
/// weight is byte for byte what [`Format::pack`] writes; every buffer's size is checked first.
pub fn pack_device(
    context: &Context,
    format: &Format,
    input: &DeviceCanonical,
    output: &mut DevicePacked,
    stream: Stream,
) -> Result<()> {
    let c = format.canonical_sizes()?;
    let p = format.packed_sizes()?;
    let element = |role| -> Result<usize> { Ok(format.dtype(role)?.bytes()) };
    let scale_bytes = if c.scales > 0 { c.scales * element(Role::SCALE)? } else { 0 };
    let zp_bytes = if c.zero_points > 0 { c.zero_points * element(Role::ZERO_POINT)? } else { 0 };
    let mut i: sys::hm_device_canonical_t = unsafe { std::mem::zeroed() };
    unsafe { sys::hm_device_canonical_init_sized(&mut i, std::mem::size_of_val(&i)) };
    i.codes = sized("codes", input.codes, c.codes)?;
    if i.codes == 0 {
        return Err(Error::invalid("'codes' is missing"));
    }
    i.scales = sized("scales", input.scales, scale_bytes)?;
    i.zero_points = sized("zero_points", input.zero_points, zp_bytes)?;
    i.global_scale = sized("global_scale", input.global_scale, c.global_scale * 4)?;
    let mut o: sys::hm_device_packed_t = unsafe { std::mem::zeroed() };
    unsafe { sys::hm_device_packed_init_sized(&mut o, std::mem::size_of_val(&o)) };
    o.weight = sized("out.weight", output.weight.as_deref(), p.weight)?;
    o.scales = sized("out.scales", output.scales.as_deref(), p.scales)?;
    o.zero_points = sized("out.zero_points", output.zero_points.as_deref(), p.zero_points)?;
    o.global_scale = sized("out.global_scale", output.global_scale.as_deref(), p.global_scale)?;
    check(unsafe {
        sys::hm_pack_device(context.as_raw(), format.as_raw(), &i, &o, stream.as_raw())
    })
}
