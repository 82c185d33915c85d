//! Dtypes: the 32-bit codes of the header, with parsing, names, decode and encode.
use std::fmt;
use std::str::FromStr;

use crate::error::{c_string, check, copy_out, Error, Result};
use crate::sys;

/// A dtype code (`hm_dtype_t`); `DType::NONE` is "no dtype".
#[derive(Copy, Clone, PartialEq, Eq, Hash, Default)]
pub struct DType(pub u32);

impl DType {
    pub const NONE: DType = DType(sys::HM_DTYPE_NONE);
    pub const F32: DType = DType(sys::HM_DTYPE_F32);
    pub const F16: DType = DType(sys::HM_DTYPE_F16);
    pub const BF16: DType = DType(sys::HM_DTYPE_BF16);
    pub const E4M3: DType = DType(sys::HM_DTYPE_E4M3);
    pub const E5M2: DType = DType(sys::HM_DTYPE_E5M2);
    pub const E2M1: DType = DType(sys::HM_DTYPE_E2M1);
    pub const UE8M0: DType = DType(sys::HM_DTYPE_UE8M0);
    pub const INT8: DType = DType(sys::HM_DTYPE_INT8);
    pub const INT4: DType = DType(sys::HM_DTYPE_INT4);
    pub const UINT4: DType = DType(sys::HM_DTYPE_UINT4);
    pub const UINT4B8: DType = DType(sys::HM_DTYPE_UINT4B8);
    pub const UINT8: DType = DType(sys::HM_DTYPE_UINT8);

    /// Parses a canonical name or alias ("f16", "fp8", "float8_e4m3fn", ...).
    pub fn parse(name: &str) -> Result<DType> {
        let text = c_string(name, "name")?;
        let mut code = 0;
        check(unsafe { sys::hm_dtype_parse(text.as_ptr(), &mut code) })?;
        Ok(DType(code))
    }

    /// The canonical name, which parses back to the same code.
    pub fn name(self) -> Result<String> {
        copy_out(|buf, size, length| unsafe { sys::hm_dtype_name(self.0, buf, size, length) })
    }

    pub fn bits(self) -> u32 {
        self.0 & 0xFF
    }

    /// Bytes of one element, rounded up (sub-byte dtypes: 1).
    pub(crate) fn bytes(self) -> usize {
        self.bits().div_ceil(8) as usize
    }

    /// The exact value of one code (dtypes of at most 8 bits, or an f16/bf16 bit pattern).
    pub fn decode(self, code: u32) -> Result<f64> {
        let mut value = 0.0;
        check(unsafe { sys::hm_dtype_decode(self.0, code, &mut value) })?;
        Ok(value)
    }

    /// The nearest code (round to nearest even, saturating to the largest finite value).
    pub fn encode(self, value: f64) -> Result<u32> {
        let mut code = 0;
        check(unsafe { sys::hm_dtype_encode(self.0, value, &mut code) })?;
        Ok(code)
    }
}

impl FromStr for DType {
    type Err = Error;
    fn from_str(s: &str) -> Result<DType> {
        DType::parse(s)
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Ok(name) => f.write_str(&name),
            Err(_) if self.0 == 0 => f.write_str("none"),
            Err(_) => write!(f, "0x{:08x}", self.0),
        }
    }
}

impl fmt::Debug for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DType({self})")
    }
}
