//! MoE routing helpers on the device (`hm_moe_align_sizes`, `hm_moe_align`, `hm_moe_reduce`;
//! docs/moe.md): the indexed layout of a router's top-k choices for the MoE GEMM, and the top-k
//! weighted sum of the down projection's rows. Asynchronous on a stream, no host synchronization,
//! capturable in a CUDA graph once a first call has compiled the kernel.
use crate::context::{Context, DeviceMemory, Stream};
use crate::dtype::DType;
use crate::error::{check, Error, Result};
use crate::sys;

/// One routing decision: `topk_ids` is int32 `[num_tokens][top_k]` global expert ids in device
/// memory; `expert_map` (optional) is int32 `[num_experts]` global -> local expert, -1 for
/// experts of other ranks, with `num_local_experts` (0: `num_experts`). Assignments whose id is
/// out of range or maps outside the local experts are dropped.
#[derive(Default)]
pub struct MoeRouting<'a> {
    pub topk_ids: Option<&'a dyn DeviceMemory>,
    pub num_tokens: i64,
    pub top_k: i32,
    pub num_experts: i32,
    pub num_local_experts: i32,
    pub expert_map: Option<&'a dyn DeviceMemory>,
}

/// Capacities (int32 elements) of [`moe_align`]'s outputs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MoeAlignSizes {
    pub sorted_ids: usize,
    pub expert_ids: usize,
    pub expert_offsets: usize,
    pub expert_counts: usize,
}

/// [`moe_align`]'s int32 output buffers in device memory; `expert_counts` is optional.
#[derive(Default)]
pub struct MoeAlignOut<'a> {
    pub sorted_ids: Option<&'a mut dyn DeviceMemory>,
    pub expert_ids: Option<&'a mut dyn DeviceMemory>,
    pub num_tokens_padded: Option<&'a mut dyn DeviceMemory>,
    pub expert_offsets: Option<&'a mut dyn DeviceMemory>,
    pub expert_counts: Option<&'a mut dyn DeviceMemory>,
}

fn ptr(buffer: Option<&dyn DeviceMemory>, name: &str, need: usize) -> Result<u64> {
    match buffer {
        None => Ok(0),
        Some(b) if b.byte_len() < need => Err(Error::invalid(format!(
            "'{name}' has {} bytes of device memory, needs {need}",
            b.byte_len()
        ))),
        Some(b) => Ok(b.device_ptr().0),
    }
}

impl MoeRouting<'_> {
    fn raw(&self) -> Result<sys::hm_moe_routing_t> {
        let mut r: sys::hm_moe_routing_t = unsafe { std::mem::zeroed() };
        unsafe { sys::hm_moe_routing_init_sized(&mut r, std::mem::size_of_val(&r)) };
        let assignments =
            (self.num_tokens.max(0) as usize).saturating_mul(self.top_k.max(0) as usize);
        r.topk_ids = ptr(self.topk_ids, "topk_ids", assignments.saturating_mul(4))?;
        r.num_tokens = self.num_tokens;
        r.top_k = self.top_k;
        r.num_experts = self.num_experts;
        r.num_local_experts = self.num_local_experts;
        r.expert_map = ptr(self.expert_map, "expert_map", self.num_experts.max(0) as usize * 4)?;
        Ok(r)
    }
}

/// The capacities of [`moe_align`]'s buffers for `routing`'s shapes and `block_size` (host only;
/// the device buffers are not read).
pub fn moe_align_sizes(routing: &MoeRouting, block_size: i32) -> Result<MoeAlignSizes> {
    let r = routing.raw()?;
    let mut s: sys::hm_moe_align_sizes_t = unsafe { std::mem::zeroed() };
    unsafe { sys::hm_moe_align_sizes_init_sized(&mut s, std::mem::size_of_val(&s)) };
    check(unsafe { sys::hm_moe_align_sizes(&r, block_size, &mut s) })?;
    Ok(MoeAlignSizes {
        sorted_ids: s.sorted_ids as usize,
        expert_ids: s.expert_ids as usize,
        expert_offsets: s.expert_offsets as usize,
        expert_counts: s.expert_counts as usize,
    })
}

/// Writes the indexed MoE layout of `routing` for token blocks of `block_size` into `out` on
/// `stream` (asynchronous: synchronize before reading). Sizes are checked first.
pub fn moe_align(
    context: &Context,
    routing: &MoeRouting,
    block_size: i32,
    out: &mut MoeAlignOut,
    stream: Stream,
) -> Result<()> {
    let s = moe_align_sizes(routing, block_size)?;
    let r = routing.raw()?;
    let mut o: sys::hm_moe_align_out_t = unsafe { std::mem::zeroed() };
    unsafe { sys::hm_moe_align_out_init_sized(&mut o, std::mem::size_of_val(&o)) };
    o.sorted_ids = ptr(out.sorted_ids.as_deref(), "sorted_ids", s.sorted_ids * 4)?;
    o.expert_ids = ptr(out.expert_ids.as_deref(), "expert_ids", s.expert_ids * 4)?;
    o.num_tokens_padded = ptr(out.num_tokens_padded.as_deref(), "num_tokens_padded", 4)?;
    o.expert_offsets = ptr(out.expert_offsets.as_deref(), "expert_offsets", s.expert_offsets * 4)?;
    o.expert_counts = ptr(out.expert_counts.as_deref(), "expert_counts", s.expert_counts * 4)?;
    check(unsafe { sys::hm_moe_align(context.as_raw(), &r, block_size, &o, stream.as_raw()) })
}

/// `out[t] = sum_j topk_weights[t][j] * input[t * top_k + j]` over `routing`'s kept assignments,
/// for `dtype` ([`DType::F16`] or [`DType::BF16`]) values `input [num_tokens * top_k][n]`, f32
/// `topk_weights [num_tokens][top_k]` and `out [num_tokens][n]`; f32 accumulation, one rounding.
pub fn moe_reduce(
    context: &Context,
    routing: &MoeRouting,
    dtype: DType,
    n: i64,
    input: &dyn DeviceMemory,
    topk_weights: &dyn DeviceMemory,
    out: &mut dyn DeviceMemory,
    stream: Stream,
) -> Result<()> {
    let r = routing.raw()?;
    let rows = (routing.num_tokens.max(0) as usize).saturating_mul(routing.top_k.max(0) as usize);
    let columns = n.max(0) as usize;
    let mut a: sys::hm_moe_reduce_args_t = unsafe { std::mem::zeroed() };
    unsafe { sys::hm_moe_reduce_args_init_sized(&mut a, std::mem::size_of_val(&a)) };
    a.dtype = dtype.0;
    a.n = n;
    a.input = ptr(Some(input), "input", rows.saturating_mul(columns).saturating_mul(2))?;
    a.topk_weights = ptr(Some(topk_weights), "topk_weights", rows.saturating_mul(4))?;
    let out_bytes = (routing.num_tokens.max(0) as usize).saturating_mul(columns).saturating_mul(2);
    a.out = ptr(Some(&*out), "out", out_bytes)?;
    check(unsafe { sys::hm_moe_reduce(context.as_raw(), &r, &a, stream.as_raw()) })
}
