//! Errors: the status of the failing call plus the library's message, read on the calling
//! thread right after the call (the message is thread-local in the C library).
use std::ffi::{c_char, CStr};
use std::fmt;

use crate::sys;

/// A failed Humming call: `status` is an `HM_ERROR_*` code (see [`crate::sys`]), `message` says
/// what was wrong and what to do.
#[derive(Clone, PartialEq, Eq)]
pub struct Error {
    status: i32,
    message: String,
}

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// An error raised by this crate's own checks, shaped like the library's.
    pub(crate) fn new(status: i32, message: impl Into<String>) -> Self {
        Error { status, message: message.into() }
    }

    pub(crate) fn invalid(message: impl Into<String>) -> Self {
        Error::new(sys::HM_ERROR_INVALID_ARGUMENT, message)
    }

    /// The `HM_ERROR_*` code.
    pub fn status(&self) -> i32 {
        self.status
    }

    /// The code's name without the prefix, e.g. `"ERROR_PARSE"` (`"UNKNOWN"` if unknown).
    pub fn name(&self) -> &'static str {
        status_name(self.status)
    }

    pub fn message(&self) -> &str {
        &self.message
    }

    /// The band of the status: `HM_ERROR_PARSE` belongs to `HM_ERROR_INVALID_ARGUMENT`.
    pub fn category(&self) -> i32 {
        sys::hm_status_category(self.status)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({}): {}", self.name(), self.status, self.message)
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl std::error::Error for Error {}

/// The name of any status code (static storage in the library).
pub fn status_name(status: i32) -> &'static str {
    let name = unsafe { sys::hm_status_name(status) };
    if name.is_null() {
        return "UNKNOWN";
    }
    unsafe { CStr::from_ptr(name) }.to_str().unwrap_or("UNKNOWN")
}

/// The calling thread's last error message (empty when there is none).
pub fn last_error_message() -> String {
    let length = unsafe { sys::hm_last_error_message(std::ptr::null_mut(), 0) };
    if length == 0 {
        return String::new();
    }
    let mut buf = vec![0u8; length + 1];
    let written = unsafe { sys::hm_last_error_message(buf.as_mut_ptr().cast(), buf.len()) };
    buf.truncate(written.min(length));
    String::from_utf8_lossy(&buf).into_owned()
}

pub fn clear_last_error() {
    unsafe { sys::hm_clear_last_error() }
}

/// Turns a status into a Result, reading the message on this thread, before any other call.
pub(crate) fn check(status: sys::hm_status_t) -> Result<()> {
    if status == sys::HM_SUCCESS {
        Ok(())
    } else {
        let mut message = last_error_message();
        if message.is_empty() {
            message = "(the library left no message)".into();
        }
        Err(Error { status, message })
    }
}

/// Calls a function that copies a string out by the snprintf rule, growing the buffer once.
pub(crate) fn copy_out(
    mut call: impl FnMut(*mut c_char, usize, *mut usize) -> sys::hm_status_t,
) -> Result<String> {
    let mut buf = vec![0u8; 256];
    let mut length = 0usize;
    let mut status = call(buf.as_mut_ptr().cast(), buf.len(), &mut length);
    if status == sys::HM_ERROR_BUFFER_TOO_SMALL {
        buf = vec![0u8; length + 1];
        status = call(buf.as_mut_ptr().cast(), buf.len(), &mut length);
    }
    check(status)?;
    buf.truncate(length);
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

/// A Rust string as a C string, with an error naming the argument for an interior NUL.
pub(crate) fn c_string(text: &str, what: &str) -> Result<std::ffi::CString> {
    std::ffi::CString::new(text)
        .map_err(|_| Error::invalid(format!("argument '{what}' contains a NUL byte")))
}

/// `value` as the C ABI's `int32_t`, or an argument error naming it: never truncated (a
/// truncated size would let the library and this crate size one buffer differently).
pub(crate) fn c_i32(value: usize, what: &str) -> Result<i32> {
    i32::try_from(value)
        .map_err(|_| Error::invalid(format!("'{what}' is {value}, beyond the C ABI's int32_t")))
}

/// `value` as the C ABI's `int64_t`, or an argument error naming it.
pub(crate) fn c_i64(value: usize, what: &str) -> Result<i64> {
    i64::try_from(value)
        .map_err(|_| Error::invalid(format!("'{what}' is {value}, beyond the C ABI's int64_t")))
}

/// The product of `factors` (an element or byte count), or an argument error naming `what`
/// when it overflows (a wrapped count would pass a size check it should fail).
pub(crate) fn product(what: &str, factors: &[usize]) -> Result<usize> {
    factors
        .iter()
        .try_fold(1usize, |acc, &f| acc.checked_mul(f))
        .ok_or_else(|| Error::invalid(format!("the size of '{what}' overflows ({factors:?})")))
}
