//! Contexts (a device, or a target arch to compile for ahead of time), runtime information and
//! device memory.
use std::ffi::{c_char, c_void};
use std::marker::PhantomData;
use std::path::{Path, PathBuf};
use std::ptr::NonNull;

use crate::error::{c_string, check, Error, Result};
use crate::sys;

/// A device address (`CUdeviceptr`). Only an address: nothing here says what it points to.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug, Default)]
pub struct DevicePtr(pub u64);

impl DevicePtr {
    pub const NULL: DevicePtr = DevicePtr(0);

    pub fn offset(self, bytes: usize) -> DevicePtr {
        DevicePtr(self.0 + bytes as u64)
    }
}

/// A CUDA stream (`CUstream`). [`Stream::DEFAULT`] is the legacy default stream.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug, Default)]
pub struct Stream(usize);

impl Stream {
    pub const DEFAULT: Stream = Stream(0);

    /// # Safety
    /// `stream` must be a live CUstream of the context's device (e.g. from another CUDA
    /// library) for as long as it is used with Humming.
    pub unsafe fn from_raw(stream: *mut c_void) -> Stream {
        Stream(stream as usize)
    }

    pub fn as_raw(self) -> *mut c_void {
        self.0 as *mut c_void
    }
}

/// Device memory Humming may read or write: an address and its size in bytes. Implemented by
/// [`DeviceBuffer`] (ours) and [`DeviceView`] (memory from another library).
///
/// # Safety
/// The kernels read and write `byte_len()` bytes at `device_ptr()` with no further check, so an
/// implementation must name device memory of the context's device, that many bytes long, that
/// stays allocated while it is borrowed (a safe trait would let safe code aim the GPU at any
/// address).
pub unsafe trait DeviceMemory {
    fn device_ptr(&self) -> DevicePtr;
    fn byte_len(&self) -> usize;
}

/// Borrowed device memory owned elsewhere (another CUDA library).
#[derive(Copy, Clone, Debug)]
pub struct DeviceView<'a> {
    ptr: DevicePtr,
    bytes: usize,
    _owner: PhantomData<&'a ()>,
}

impl<'a> DeviceView<'a> {
    /// # Safety
    /// `ptr` must address `bytes` bytes of device memory of the context's device that stay
    /// allocated, and are not used by others in conflicting ways, for the lifetime `'a`.
    pub unsafe fn from_raw(ptr: DevicePtr, bytes: usize) -> DeviceView<'a> {
        DeviceView { ptr, bytes, _owner: PhantomData }
    }
}

// SAFETY: DeviceView::new's contract is this trait's.
unsafe impl DeviceMemory for DeviceView<'_> {
    fn device_ptr(&self) -> DevicePtr {
        self.ptr
    }
    fn byte_len(&self) -> usize {
        self.bytes
    }
}

/// Plain data that may be copied to and from the device byte for byte.
pub trait HostData: Copy + 'static {}
impl HostData for u8 {}
impl HostData for i8 {}
impl HostData for u16 {}
impl HostData for i16 {}
impl HostData for u32 {}
impl HostData for i32 {}
impl HostData for u64 {}
impl HostData for i64 {}
impl HostData for f32 {}
impl HostData for f64 {}

/// Which compiler builds kernels (`HM_COMPILER_*`).
#[derive(Copy, Clone, PartialEq, Eq, Debug, Default)]
pub struct Compiler(pub i32);

impl Compiler {
    pub const DEFAULT: Compiler = Compiler(sys::HM_COMPILER_DEFAULT);
    pub const NVRTC: Compiler = Compiler(sys::HM_COMPILER_NVRTC);
    pub const NVCC: Compiler = Compiler(sys::HM_COMPILER_NVCC);
}

/// Options for [`Context::with_options`]. `device: None` compiles ahead of time for `target_arch`.
#[derive(Clone, Debug, Default)]
pub struct ContextOptions {
    pub device: Option<i32>,
    pub target_arch: Option<String>,
    pub cache_dir: Option<PathBuf>,
    pub compiler: Compiler,
    pub disable_jit: bool,
    pub no_cache: bool,
}

/// What the context's device is (or the target arch, without a device).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceInfo {
    pub device: i32,
    pub cc_major: i32,
    pub cc_minor: i32,
    pub name: String,
    pub arch: String,
    pub multiprocessors: i32,
    pub shared_memory_per_block_optin: i64,
    pub l2_cache_bytes: i64,
    pub total_memory_bytes: i64,
}

/// What the library found on this machine (`humming info`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuntimeInfo {
    pub driver_version: i32,
    pub device_count: i32,
    pub driver_path: String,
    pub driver_error: String,
    pub nvrtc_version: i32,
    pub nvrtc_path: String,
    pub nvrtc_error: String,
    pub nvcc_path: String,
    pub nvcc_version: String,
    pub kernel_sources: String,
    pub cache_dir: String,
    pub cache_bytes: u64,
    pub cache_entries: u64,
}

pub(crate) fn text(chars: &[c_char]) -> String {
    let bytes: Vec<u8> = chars.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// What [`cache_prune`] removed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CachePruned {
    pub entries: u64,
    pub bytes: u64,
}

/// Trims the kernel cache: removes the entries not used for `max_age` (`None`: no age limit),
/// then the least recently used ones while the cache takes more than `max_bytes` (`None`: no
/// size limit). `dir` `None`: the default cache.
pub fn cache_prune(
    dir: Option<&Path>,
    max_age: Option<std::time::Duration>,
    max_bytes: Option<u64>,
) -> Result<CachePruned> {
    let dir = dir.map(path_string).transpose()?;
    let mut out = CachePruned::default();
    check(unsafe {
        sys::hm_cache_prune(
            dir.as_ref().map_or(std::ptr::null(), |d| d.as_ptr()),
            max_age.map_or(0, |a| a.as_secs()),
            max_bytes.unwrap_or(u64::MAX),
            &mut out.entries,
            &mut out.bytes,
        )
    })?;
    Ok(out)
}

pub fn runtime_info() -> Result<RuntimeInfo> {
    let mut i: sys::hm_runtime_info_t = unsafe { std::mem::zeroed() };
    unsafe { sys::hm_runtime_info_init_sized(&mut i, std::mem::size_of_val(&i)) };
    check(unsafe { sys::hm_runtime_info(&mut i) })?;
    Ok(RuntimeInfo {
        driver_version: i.driver_version,
        device_count: i.device_count,
        driver_path: text(&i.driver_path),
        driver_error: text(&i.driver_error),
        nvrtc_version: i.nvrtc_version,
        nvrtc_path: text(&i.nvrtc_path),
        nvrtc_error: text(&i.nvrtc_error),
        nvcc_path: text(&i.nvcc_path),
        nvcc_version: text(&i.nvcc_version),
        kernel_sources: text(&i.kernel_sources),
        cache_dir: text(&i.cache_dir),
        cache_bytes: i.cache_bytes,
        cache_entries: i.cache_entries,
    })
}

/// A device with its driver state, compiler and kernel cache, or a target arch without a
/// device. The header promises a context may be used from several threads at once, so it is
/// `Send + Sync`. Kernels and plans keep its state alive, so they may outlive it.
pub struct Context {
    raw: NonNull<sys::hm_context_t>,
    device: i32,
}

unsafe impl Send for Context {}
unsafe impl Sync for Context {}

impl Drop for Context {
    fn drop(&mut self) {
        unsafe { sys::hm_context_destroy(self.raw.as_ptr()) }
    }
}

impl Context {
    /// A context on CUDA device `device` with default options.
    pub fn new(device: i32) -> Result<Context> {
        Context::with_options(&ContextOptions { device: Some(device), ..Default::default() })
    }

    /// A context without a device that compiles for `arch` ("sm_90a", ...).
    pub fn ahead_of_time(arch: &str) -> Result<Context> {
        Context::with_options(&ContextOptions {
            target_arch: Some(arch.into()),
            ..Default::default()
        })
    }

    pub fn with_options(options: &ContextOptions) -> Result<Context> {
        let arch =
            options.target_arch.as_deref().map(|a| c_string(a, "target_arch")).transpose()?;
        let cache = options.cache_dir.as_deref().map(path_string).transpose()?;
        let mut o: sys::hm_context_options_t = unsafe { std::mem::zeroed() };
        unsafe { sys::hm_context_options_init_sized(&mut o, std::mem::size_of_val(&o)) };
        o.device = options.device.unwrap_or(sys::HM_NO_DEVICE);
        o.target_arch = arch.as_ref().map_or(std::ptr::null(), |a| a.as_ptr());
        o.cache_dir = cache.as_ref().map_or(std::ptr::null(), |c| c.as_ptr());
        o.compiler = options.compiler.0;
        o.flags = (if options.disable_jit { sys::HM_CONTEXT_DISABLE_JIT } else { 0 }
            | if options.no_cache { sys::HM_CONTEXT_NO_CACHE } else { 0 }) as u32;
        let mut raw = std::ptr::null_mut();
        check(unsafe { sys::hm_context_create(&o, &mut raw) })?;
        let raw = NonNull::new(raw).ok_or_else(|| {
            Error::new(sys::HM_ERROR_INTERNAL, "the library returned a NULL context")
        })?;
        Ok(Context { raw, device: o.device })
    }

    pub fn as_raw(&self) -> *mut sys::hm_context_t {
        self.raw.as_ptr()
    }

    /// The device ordinal, or `HM_NO_DEVICE` (-1).
    pub fn device(&self) -> i32 {
        self.device
    }

    pub fn device_info(&self) -> Result<DeviceInfo> {
        let mut i: sys::hm_device_info_t = unsafe { std::mem::zeroed() };
        unsafe { sys::hm_device_info_init_sized(&mut i, std::mem::size_of_val(&i)) };
        check(unsafe { sys::hm_context_device_info(self.raw.as_ptr(), &mut i) })?;
        Ok(DeviceInfo {
            device: i.device,
            cc_major: i.cc_major,
            cc_minor: i.cc_minor,
            name: text(&i.name),
            arch: text(&i.arch),
            multiprocessors: i.multiprocessors,
            shared_memory_per_block_optin: i.shared_memory_per_block_optin,
            l2_cache_bytes: i.l2_cache_bytes,
            total_memory_bytes: i.total_memory_bytes,
        })
    }

    /// `bytes` of device memory (uninitialized), freed when the buffer is dropped.
    pub fn alloc(&self, bytes: usize) -> Result<DeviceBuffer<'_>> {
        let mut ptr = 0u64;
        check(unsafe { sys::hm_device_alloc(self.raw.as_ptr(), bytes.max(1), &mut ptr) })?;
        Ok(DeviceBuffer { context: self, ptr: DevicePtr(ptr), bytes })
    }

    /// Device memory holding a copy of `data`.
    pub fn to_device<T: HostData>(&self, data: &[T]) -> Result<DeviceBuffer<'_>> {
        let mut buffer = self.alloc(std::mem::size_of_val(data))?;
        buffer.copy_from(data)?;
        Ok(buffer)
    }

    /// Zero-filled device memory (workspaces are zeroed once, then the kernels keep them so).
    pub fn zeroed(&self, bytes: usize) -> Result<DeviceBuffer<'_>> {
        self.to_device(&vec![0u8; bytes])
    }

    /// Waits for the work queued on `stream`.
    pub fn synchronize(&self, stream: Stream) -> Result<()> {
        check(unsafe { sys::hm_stream_synchronize(self.raw.as_ptr(), stream.as_raw()) })
    }

    /// # Safety
    /// `dst` must address at least `size_of_val(src)` writable bytes of this context's device.
    pub unsafe fn copy_to_device_raw<T: HostData>(&self, dst: DevicePtr, src: &[T]) -> Result<()> {
        check(sys::hm_copy_to_device(
            self.raw.as_ptr(),
            dst.0,
            src.as_ptr().cast(),
            std::mem::size_of_val(src),
        ))
    }

    /// # Safety
    /// `src` must address at least `size_of_val(dst)` readable bytes of this context's device.
    pub unsafe fn copy_to_host_raw<T: HostData>(
        &self,
        dst: &mut [T],
        src: DevicePtr,
    ) -> Result<()> {
        check(sys::hm_copy_to_host(
            self.raw.as_ptr(),
            dst.as_mut_ptr().cast(),
            src.0,
            std::mem::size_of_val(dst),
        ))
    }
}

fn path_string(path: &Path) -> Result<std::ffi::CString> {
    let text = path
        .to_str()
        .ok_or_else(|| Error::invalid(format!("the path {} is not UTF-8", path.display())))?;
    c_string(text, "cache_dir")
}

/// Device memory from [`Context::alloc`]; freed on drop. It borrows its context.
pub struct DeviceBuffer<'ctx> {
    context: &'ctx Context,
    ptr: DevicePtr,
    bytes: usize,
}

impl DeviceBuffer<'_> {
    pub fn ptr(&self) -> DevicePtr {
        self.ptr
    }

    pub fn len(&self) -> usize {
        self.bytes
    }

    pub fn is_empty(&self) -> bool {
        self.bytes == 0
    }

    fn require(&self, bytes: usize, what: &str) -> Result<()> {
        if bytes != self.bytes {
            return Err(Error::invalid(format!(
                "'{what}' has {bytes} bytes, the device buffer has {}",
                self.bytes
            )));
        }
        Ok(())
    }

    /// Copies a host slice of exactly this buffer's size in (synchronously).
    pub fn copy_from<T: HostData>(&mut self, src: &[T]) -> Result<()> {
        self.require(std::mem::size_of_val(src), "src")?;
        unsafe { self.context.copy_to_device_raw(self.ptr, src) }
    }

    /// Copies the whole buffer into a host slice of exactly its size (synchronously).
    pub fn copy_to<T: HostData>(&self, dst: &mut [T]) -> Result<()> {
        self.require(std::mem::size_of_val(dst), "dst")?;
        unsafe { self.context.copy_to_host_raw(dst, self.ptr) }
    }

    /// A host copy as elements of T (the size must be a multiple of T's).
    pub fn to_vec<T: HostData + Default>(&self) -> Result<Vec<T>> {
        let size = std::mem::size_of::<T>();
        if self.bytes % size != 0 {
            return Err(Error::invalid(format!(
                "{} bytes are not a whole number of {size}-byte elements",
                self.bytes
            )));
        }
        let mut out = vec![T::default(); self.bytes / size];
        self.copy_to(&mut out)?;
        Ok(out)
    }
}

// SAFETY: an allocation of this context, `bytes` long, freed only on drop.
unsafe impl DeviceMemory for DeviceBuffer<'_> {
    fn device_ptr(&self) -> DevicePtr {
        self.ptr
    }
    fn byte_len(&self) -> usize {
        self.bytes
    }
}

impl Drop for DeviceBuffer<'_> {
    fn drop(&mut self) {
        // A failure here (a dead context) cannot be reported from drop; the memory is gone
        // with the context anyway.
        let _ = unsafe { sys::hm_device_free(self.context.raw.as_ptr(), self.ptr.0) };
    }
}

impl std::fmt::Debug for DeviceBuffer<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DeviceBuffer({:#x}, {} bytes)", self.ptr.0, self.bytes)
    }
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Context(device {})", self.device)
    }
}
