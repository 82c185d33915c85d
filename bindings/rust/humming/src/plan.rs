//! Plans: one layer (a Format) on one context, prepared once and then run many times.
use std::ptr::NonNull;

use crate::context::{Context, DeviceMemory, Stream};
use crate::dtype::DType;
use crate::error::{c_i32, c_i64, c_string, check, copy_out, Error, Result};
use crate::format::{Format, PackedSizes};
use crate::kernel::{LaunchParams, Slot};
use crate::sys;

/// Options for [`Plan::new`].
#[derive(Clone, Debug, Default)]
pub struct PlanOptions {
    /// Allow reductions whose order depends on timing (`HM_PLAN_NONDETERMINISTIC`).
    pub nondeterministic: bool,
    /// The largest M the plan will run (0: no limit).
    pub max_m: i64,
    /// A JSON tuning override (docs/tuning.md).
    pub tuning_json: Option<String>,
}

/// The device buffers of one GEMM: the standard-layout weight (from [`Format::pack`], uploaded)
/// and what the format needs besides it. Fields the format does not use stay `None`.
#[derive(Default)]
pub struct GemmArgs<'a> {
    pub a: Option<&'a dyn DeviceMemory>,
    /// 8-bit activations (a=e4m3, a=e5m2, a=int8) only, and needed there: `a` holds one code per byte
    /// and this the f32 scale of each of its M rows, as
    /// [`quantize_activation_device`](crate::quantize_activation_device) writes them with
    /// group_k 0; with activation groups (a=e4m3:g128, [`Format::activation_groups`]) the f32
    /// `[M][ceil(K / group_k)]` scales the quantizer writes with that group_k.
    pub act_scales: Option<&'a dyn DeviceMemory>,
    pub weight: Option<&'a dyn DeviceMemory>,
    pub scales: Option<&'a dyn DeviceMemory>,
    pub zero_points: Option<&'a dyn DeviceMemory>,
    pub global_scale: Option<&'a dyn DeviceMemory>,
    pub bias: Option<&'a dyn DeviceMemory>,
    pub workspace: Option<&'a dyn DeviceMemory>,
}

/// The indexed routing of a MoE call ([`Plan::moe_gemm`]): int32 device buffers.
pub struct MoeRoutingBuffers<'a> {
    pub sorted_ids: &'a dyn DeviceMemory,
    pub expert_ids: &'a dyn DeviceMemory,
    pub num_tokens_padded: &'a dyn DeviceMemory,
}

/// How a call finds each expert's rows (`HM_ARG_MOE_MODE`, docs/moe.md).
enum Routing<'r> {
    Dense,
    Indexed(&'r MoeRoutingBuffers<'r>, usize),
    Contiguous(&'r dyn DeviceMemory),
    Masked(&'r dyn DeviceMemory),
}

/// A format bound to a context: validated on creation, every kernel compiled in
/// [`Plan::prepare`], then [`Plan::gemm`] runs with no host synchronization and no allocation.
/// The header promises a prepared plan may be used from several threads at once (each with its
/// own launch params), so it is `Send + Sync`; preparing takes `&mut self`.
pub struct Plan {
    raw: NonNull<sys::hm_plan_t>,
    n: usize,
    experts: usize,
    activation: DType,
    /// The activation scales per row: ceil(K / group_k) with activation groups, else 1.
    act_groups: ActGroups,
    a_row_bytes: usize,
    c_elem_bytes: usize,
    bias: bool,
    packed: PackedSizes,
}

unsafe impl Send for Plan {}
unsafe impl Sync for Plan {}

impl Drop for Plan {
    fn drop(&mut self) {
        unsafe { sys::hm_plan_destroy(self.raw.as_ptr()) }
    }
}

fn require(name: &str, buffer: Option<&dyn DeviceMemory>, need: usize) -> Result<u64> {
    match buffer {
        None if need == 0 => Ok(0),
        None => Err(Error::invalid(format!(
            "'{name}' is missing; this format needs {need} bytes of it"
        ))),
        Some(b) if b.byte_len() < need => Err(Error::invalid(format!(
            "'{name}' has {} bytes of device memory, needs {need}",
            b.byte_len()
        ))),
        Some(b) => Ok(b.device_ptr().0),
    }
}

/// How many f32 activation scales each row of A has: one (`group_k` 0), or one per group of
/// `group_k` inputs, `ceil(K / group_k)` (activation groups, "a=e4m3:g128").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct ActGroups {
    group_k: usize,
    groups: usize,
}

impl ActGroups {
    fn new(group_k: i32, k: usize) -> ActGroups {
        match usize::try_from(group_k) {
            Ok(g) if g > 0 => ActGroups { group_k: g, groups: k.div_ceil(g) },
            _ => ActGroups { group_k: 0, groups: 1 },
        }
    }

    fn describe(&self, m: usize) -> String {
        if self.group_k == 0 {
            format!("one f32 scale per row, {} bytes for {m} rows of A", m * 4)
        } else {
            format!(
                "f32 [M][{}] scales, one per row and group of {} along K, {} bytes for {m} rows of A",
                self.groups,
                self.group_k,
                m * self.groups * 4
            )
        }
    }
}

/// The `ACT_SCALES` pointer for M rows: `Some` exactly for 8-bit activations (a=e4m3, a=e5m2, a=int8),
/// whose codes mean nothing without their f32 scales (`[M]`, or `[M][G]` with activation
/// groups); the library refuses the slot for every other format, so a buffer given there is a
/// mistake too.
fn act_scales_pointer(
    activation: DType,
    groups: ActGroups,
    buffer: Option<&dyn DeviceMemory>,
    m: usize,
) -> Result<Option<u64>> {
    let scaled =
        activation == DType::E4M3 || activation == DType::E5M2 || activation == DType::INT8;
    match (scaled, buffer) {
        (true, None) => Err(Error::invalid(format!(
            "'act_scales' is missing; a={activation} activations need {}",
            groups.describe(m)
        ))),
        (true, Some(b)) if b.byte_len() < m * groups.groups * 4 => Err(Error::invalid(format!(
            "'act_scales' has {} bytes of device memory; a={activation} activations need {}",
            b.byte_len(),
            groups.describe(m)
        ))),
        (true, Some(b)) => Ok(Some(b.device_ptr().0)),
        (false, Some(_)) => Err(Error::invalid(format!(
            "'act_scales' was given, but a={activation} activations have no scales (only a=e4m3, \
             a=e5m2 and a=int8 do)"
        ))),
        (false, None) => Ok(None),
    }
}

impl Plan {
    pub fn new(context: &Context, format: &Format, options: &PlanOptions) -> Result<Plan> {
        let tuning =
            options.tuning_json.as_deref().map(|t| c_string(t, "tuning_json")).transpose()?;
        let mut o: sys::hm_plan_options_t = unsafe { std::mem::zeroed() };
        unsafe { sys::hm_plan_options_init_sized(&mut o, std::mem::size_of_val(&o)) };
        o.flags = if options.nondeterministic { sys::HM_PLAN_NONDETERMINISTIC as u32 } else { 0 };
        o.max_m = options.max_m;
        o.tuning_json = tuning.as_ref().map_or(std::ptr::null(), |t| t.as_ptr());
        let mut raw = std::ptr::null_mut();
        check(unsafe { sys::hm_plan_create(context.as_raw(), format.as_raw(), &o, &mut raw) })?;
        let raw = NonNull::new(raw).ok_or_else(|| {
            Error::new(sys::HM_ERROR_INTERNAL, "the library returned a NULL plan")
        })?;
        let (n, k, experts) = format.shape()?;
        let act = format.dtype(crate::format::Role::ACTIVATION)?;
        let out = format.dtype(crate::format::Role::OUTPUT)?;
        Ok(Plan {
            raw,
            n: n as usize,
            experts: experts as usize,
            activation: act,
            act_groups: ActGroups::new(format.activation_groups()?, k as usize),
            a_row_bytes: (k as usize * act.bits() as usize).div_ceil(8),
            c_elem_bytes: out.bytes(),
            bias: format.bias()?,
            packed: format.packed_sizes()?,
        })
    }

    /// Compiles (or loads from the cache) every kernel the plan can choose.
    pub fn prepare(&mut self) -> Result<()> {
        check(unsafe { sys::hm_plan_prepare(self.raw.as_ptr()) })
    }

    /// Device workspace bytes for calls with M up to `max_m`; allocate it zeroed once
    /// ([`Context::zeroed`]).
    pub fn workspace_size(&self, max_m: i64) -> Result<u64> {
        let mut bytes = 0u64;
        check(unsafe { sys::hm_plan_workspace_size(self.raw.as_ptr(), max_m, &mut bytes) })?;
        Ok(bytes)
    }

    /// MoE plans: the block size the routing pads each expert's rows to for M tokens.
    pub fn moe_block_size(&self, m: i64) -> Result<i32> {
        let mut block = 0i32;
        check(unsafe { sys::hm_plan_moe_block_size(self.raw.as_ptr(), m, &mut block) })?;
        Ok(block)
    }

    /// MoE plans: the entries `SORTED_IDS` must hold for M tokens and `top_k` experts each.
    pub fn moe_rows(&self, m: i64, top_k: i32) -> Result<i64> {
        let mut rows = 0i64;
        check(unsafe { sys::hm_plan_moe_rows(self.raw.as_ptr(), m, top_k, &mut rows) })?;
        Ok(rows)
    }

    /// The kernel and tiling used for M, for logs.
    pub fn describe(&self, m: i64) -> Result<String> {
        copy_out(|buf, size, length| unsafe {
            sys::hm_plan_describe(self.raw.as_ptr(), m, buf, size, length)
        })
    }

    /// Runs with raw launch parameters (asynchronous).
    ///
    /// # Safety
    /// The pointers in `params` must address device memory of the sizes the format and M need,
    /// live until the work on `stream` has finished.
    pub unsafe fn gemm_raw(&self, params: &LaunchParams, stream: Stream) -> Result<()> {
        check(sys::hm_plan_gemm(self.raw.as_ptr(), params.as_raw(), stream.as_raw()))
    }

    /// `C[M,N] = A[M,K] * dequant(W)^T (+ bias)` on `stream`, with every buffer's size checked
    /// against the format and M first. Asynchronous: synchronize before reading C. 8-bit
    /// activations (a=e4m3, a=e5m2, a=int8): `a` is `[M, K]` codes, `args.act_scales` their `[M]` f32
    /// scales (`[M][ceil(K / group_k)]` with activation groups, a=e4m3:g128).
    pub fn gemm(
        &self,
        params: &mut LaunchParams,
        args: &GemmArgs,
        c: &mut dyn DeviceMemory,
        m: usize,
        stream: Stream,
    ) -> Result<()> {
        if self.experts > 1 {
            return Err(Error::invalid(format!(
                "the plan's format has {} experts: use moe_gemm",
                self.experts
            )));
        }
        self.run(params, args, c, m, m, m, Routing::Dense, stream)
    }

    /// MoE plans (experts >= 2), indexed (docs/moe.md): `C[M * top_k, N]`, row `t * top_k + j`
    /// being token t through its j-th expert (A `[M, K]`; the weight-side buffers and the bias
    /// hold every expert). The routing buffers are laid out by `moe_align` with
    /// [`Plan::moe_block_size`]`(M)`; their sizes are checked, their contents read only on the
    /// device. Asynchronous.
    #[allow(clippy::too_many_arguments)]
    pub fn moe_gemm(
        &self,
        params: &mut LaunchParams,
        args: &GemmArgs,
        routing: &MoeRoutingBuffers,
        c: &mut dyn DeviceMemory,
        m: usize,
        top_k: usize,
        stream: Stream,
    ) -> Result<()> {
        if self.experts < 2 {
            return Err(Error::invalid("the plan's format is dense (one expert): use gemm"));
        }
        let rows = self.moe_rows(c_i64(m, "m")?, c_i32(top_k, "top_k")?)? as usize;
        let block = self.moe_block_size(c_i64(m, "m")?)? as usize;
        for (name, buffer, need) in [
            ("sorted_ids", routing.sorted_ids, rows * 4),
            ("expert_ids", routing.expert_ids, rows / block * 4),
            ("num_tokens_padded", routing.num_tokens_padded, 4),
        ] {
            require(name, Some(buffer), need)?;
        }
        self.run(params, args, c, m, m, m * top_k, Routing::Indexed(routing, top_k), stream)
    }

    /// MoE plans, grouped contiguous (docs/moe.md): A `[M, K]` with rows grouped by expert,
    /// `C[M, N]`; expert e owns rows `expert_offsets[e] .. expert_offsets[e + 1]` (int32,
    /// `E + 1` entries, read only on the device and clamped to `[0, M]`). Rows outside every
    /// expert's run are not written. Asynchronous.
    pub fn moe_gemm_contiguous(
        &self,
        params: &mut LaunchParams,
        args: &GemmArgs,
        expert_offsets: &dyn DeviceMemory,
        c: &mut dyn DeviceMemory,
        m: usize,
        stream: Stream,
    ) -> Result<()> {
        if self.experts < 2 {
            return Err(Error::invalid("the plan's format is dense (one expert): use gemm"));
        }
        require("expert_offsets", Some(expert_offsets), (self.experts + 1) * 4)?;
        self.run(params, args, c, m, m, m, Routing::Contiguous(expert_offsets), stream)
    }

    /// MoE plans, grouped masked (docs/moe.md): A `[E, t_max, K]`, `C[E, t_max, N]`; only the
    /// first `masked_m[e]` rows of expert e's slab are read and written (int32, `E` entries,
    /// read only on the device and clamped to `[0, t_max]`). Asynchronous.
    pub fn moe_gemm_masked(
        &self,
        params: &mut LaunchParams,
        args: &GemmArgs,
        masked_m: &dyn DeviceMemory,
        c: &mut dyn DeviceMemory,
        t_max: usize,
        stream: Stream,
    ) -> Result<()> {
        if self.experts < 2 {
            return Err(Error::invalid("the plan's format is dense (one expert): use gemm"));
        }
        require("masked_m", Some(masked_m), self.experts * 4)?;
        let rows = self.experts * t_max;
        self.run(params, args, c, t_max, rows, rows, Routing::Masked(masked_m), stream)
    }

    #[allow(clippy::too_many_arguments)]
    fn run(
        &self,
        params: &mut LaunchParams,
        args: &GemmArgs,
        c: &mut dyn DeviceMemory,
        m: usize,
        a_rows: usize,
        c_rows: usize,
        routing: Routing,
        stream: Stream,
    ) -> Result<()> {
        let a = require("a", args.a, a_rows * self.a_row_bytes)?;
        if a == 0 {
            return Err(Error::invalid("'a' is missing"));
        }
        // One scale (or one per K group) per row of A: E * t_max rows in the masked mode.
        let act_scales =
            act_scales_pointer(self.activation, self.act_groups, args.act_scales, a_rows)?;
        let c_need = c_rows * self.n * self.c_elem_bytes;
        if c.byte_len() < c_need {
            return Err(Error::invalid(format!(
                "'c' has {} bytes of device memory, needs {c_need}",
                c.byte_len()
            )));
        }
        let weight = require("weight", args.weight, self.packed.weight)?;
        let scales = require("scales", args.scales, self.packed.scales)?;
        let zeros = require("zero_points", args.zero_points, self.packed.zero_points)?;
        let global = require("global_scale", args.global_scale, self.packed.global_scale)?;
        let bias = require(
            "bias",
            args.bias,
            if self.bias { self.experts * self.n * self.c_elem_bytes } else { 0 },
        )?;
        if !self.bias && args.bias.is_some() {
            return Err(Error::invalid("'bias' was given, but the format has no bias"));
        }
        params.clear()?;
        params
            .set_pointer(Slot::A, crate::DevicePtr(a))?
            .set_pointer(Slot::B, crate::DevicePtr(weight))?
            .set_pointer(Slot::C, c.device_ptr())?
            .set_int(Slot::M, m as i64)?;
        if let Some(ptr) = act_scales {
            params.set_pointer(Slot::ACT_SCALES, crate::DevicePtr(ptr))?;
        }
        for (slot, ptr) in [
            (Slot::SCALES, scales),
            (Slot::ZEROS, zeros),
            (Slot::GLOBAL, global),
            (Slot::BIAS, bias),
        ] {
            if ptr != 0 {
                params.set_pointer(slot, crate::DevicePtr(ptr))?;
            }
        }
        if let Some(ws) = args.workspace {
            // The library checks its size against what this M needs, and names both.
            params
                .set_pointer(Slot::WORKSPACE, ws.device_ptr())?
                .set_int(Slot::WORKSPACE_BYTES, ws.byte_len() as i64)?;
        }
        match routing {
            Routing::Dense => {}
            Routing::Indexed(r, top_k) => {
                params
                    .set_pointer(Slot::SORTED_IDS, r.sorted_ids.device_ptr())?
                    .set_pointer(Slot::EXPERT_IDS, r.expert_ids.device_ptr())?
                    .set_pointer(Slot::NUM_TOKENS_PADDED, r.num_tokens_padded.device_ptr())?
                    .set_int(Slot::TOP_K, top_k as i64)?;
            }
            Routing::Contiguous(offsets) => {
                params
                    .set_int(Slot::MOE_MODE, sys::HM_MOE_MODE_CONTIGUOUS as i64)?
                    .set_pointer(Slot::EXPERT_OFFSETS, offsets.device_ptr())?;
            }
            Routing::Masked(counts) => {
                params
                    .set_int(Slot::MOE_MODE, sys::HM_MOE_MODE_MASKED as i64)?
                    .set_pointer(Slot::MASKED_M, counts.device_ptr())?;
            }
        }
        unsafe { self.gemm_raw(params, stream) }
    }
}

impl std::fmt::Debug for Plan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Plan(n {}, {:?})", self.n, self.packed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::DevicePtr;

    /// Only its size matters to the checks; nothing reads through it.
    struct Buffer(usize);

    // SAFETY: never launched: the tests below check arguments before any launch.
    unsafe impl DeviceMemory for Buffer {
        fn device_ptr(&self) -> DevicePtr {
            DevicePtr(0x1000)
        }
        fn byte_len(&self) -> usize {
            self.0
        }
    }

    // The check Plan::gemm and Plan::moe_gemm run before the C call, for every activation kind
    // (the mock tests reach it through a plan only where the library can plan a=e4m3 formats).
    #[test]
    fn act_scales_come_with_8_bit_activations_only() {
        let per_row = ActGroups::new(0, 256);
        let (enough, short) = (Buffer(16 * 4), Buffer(15 * 4));
        for act in [DType::E4M3, DType::E5M2, DType::INT8] {
            assert_eq!(act_scales_pointer(act, per_row, Some(&enough), 16).unwrap(), Some(0x1000));
            let e = act_scales_pointer(act, per_row, None, 16).unwrap_err();
            assert!(e.message().contains("'act_scales' is missing"), "{e}");
            let e = act_scales_pointer(act, per_row, Some(&short), 16).unwrap_err();
            assert!(e.message().contains("'act_scales' has 60 bytes"), "{e}");
        }
        for act in [DType::F16, DType::BF16, DType::INT4] {
            assert_eq!(act_scales_pointer(act, per_row, None, 16).unwrap(), None);
            let e = act_scales_pointer(act, per_row, Some(&enough), 16).unwrap_err();
            assert!(e.message().contains("'act_scales' was given"), "{e}");
        }
    }

    // Activation groups (a=e4m3:g128): [M][ceil(K / group_k)] scales.
    #[test]
    fn grouped_act_scales_need_one_per_row_and_k_group() {
        assert_eq!(ActGroups::new(128, 512), ActGroups { group_k: 128, groups: 4 });
        assert_eq!(ActGroups::new(128, 520), ActGroups { group_k: 128, groups: 5 });
        assert_eq!(ActGroups::new(0, 512), ActGroups { group_k: 0, groups: 1 });
        let g = ActGroups::new(128, 512);
        let (enough, per_row) = (Buffer(16 * 4 * 4), Buffer(16 * 4));
        assert_eq!(act_scales_pointer(DType::E4M3, g, Some(&enough), 16).unwrap(), Some(0x1000));
        let e = act_scales_pointer(DType::E4M3, g, Some(&per_row), 16).unwrap_err();
        assert!(e.message().contains("'act_scales' has 64 bytes"), "{e}");
        assert!(e.message().contains("[M][4]"), "{e}");
        let e = act_scales_pointer(DType::E4M3, g, None, 16).unwrap_err();
        assert!(e.message().contains("group of 128"), "{e}");
    }
}
