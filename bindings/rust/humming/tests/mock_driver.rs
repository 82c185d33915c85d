//! Contexts, device memory, kernels and plans on the mock CUDA driver (its device memory is
//! host memory and it runs the reference GEMM kernel as host code, so results are real).
//! CTest sets HUMMING_MOCK_DRIVER (and HUMMING_REQUIRE_MOCK, so nothing here skips silently).
use std::sync::{Once, RwLock, RwLockReadGuard, RwLockWriteGuard};

use humming::{
    sys, Context, ContextOptions, DType, Format, GemmArgs, LaunchParams, Plan, PlanOptions, Stream,
};

// The process environment, which every test here reads through the mock driver: the tests run on
// parallel threads, and one of them switches the mock's allocation failure on with an
// environment variable, which every other test's allocations would see while it is set (issue
// 14: bindings_rust failed now and then under `ctest -j2`). The others hold this shared, that
// one exclusively; a test that panicked while holding it does not poison the rest.
static ENVIRONMENT: RwLock<()> = RwLock::new(());

fn mock_driver_loaded() -> bool {
    static SETUP: Once = Once::new();
    let path = std::env::var("HUMMING_MOCK_DRIVER").ok();
    if path.is_none() {
        assert!(
            std::env::var("HUMMING_REQUIRE_MOCK").is_err(),
            "HUMMING_REQUIRE_MOCK is set but HUMMING_MOCK_DRIVER is not"
        );
        eprintln!("skipped: HUMMING_MOCK_DRIVER is not set (CTest sets it)");
        return false;
    }
    // The driver is loaded once per process, on first use: point the library at the mock first.
    SETUP.call_once(|| std::env::set_var("HUMMING_CUDA_DRIVER_PATH", path.unwrap()));
    true
}

/// The mock driver is in use (None: skipped), with the environment held shared.
fn mock() -> Option<RwLockReadGuard<'static, ()>> {
    let env = ENVIRONMENT.read().unwrap_or_else(|e| e.into_inner());
    mock_driver_loaded().then_some(env)
}

/// As mock(), for a test that changes the environment: no other test runs meanwhile.
fn mock_exclusive() -> Option<RwLockWriteGuard<'static, ()>> {
    let env = ENVIRONMENT.write().unwrap_or_else(|e| e.into_inner());
    mock_driver_loaded().then_some(env)
}

fn context(device: i32) -> Context {
    let cache = std::env::var("HUMMING_CACHE_DIR").ok().map(Into::into);
    Context::with_options(&ContextOptions {
        device: Some(device),
        cache_dir: cache,
        ..Default::default()
    })
    .unwrap()
}

#[test]
fn device_and_runtime_info() {
    let Some(_env) = mock() else {
        return;
    };
    let ctx = context(0);
    let info = ctx.device_info().unwrap();
    assert_eq!((info.device, info.cc_major, info.arch.as_str()), (0, 9, "sm_90a"));
    assert!(info.name.contains("Mock"));
    let rt = humming::runtime_info().unwrap();
    assert_eq!(rt.device_count, 2);
    assert!(rt.driver_path.contains("humming_mock_cuda"));
}

#[test]
fn device_memory_round_trip_and_checks() {
    let Some(_env) = mock() else {
        return;
    };
    let ctx = context(0);
    let data: Vec<f32> = (0..100).map(|i| i as f32 * 0.5).collect();
    let buf = ctx.to_device(&data).unwrap();
    assert_eq!(buf.len(), 400);
    assert_eq!(buf.to_vec::<f32>().unwrap(), data);
    let mut small = [0f32; 10];
    assert!(buf.copy_to(&mut small).unwrap_err().message().contains("400"));
}

#[test]
fn reference_kernel_matches_host() {
    let Some(_env) = mock() else {
        return;
    };
    let ctx = context(0);
    let kernel = ctx.reference_gemm_kernel(DType::F32, DType::F32).unwrap();
    assert_eq!(kernel.name().unwrap(), "reference_gemm_f32_f32");
    assert_eq!(kernel.cache_key().unwrap().len(), 64);
    let (m, n, k) = (5usize, 7usize, 33usize);
    let a: Vec<f32> = (0..m * k).map(|i| (i % 9) as f32 - 4.0).collect();
    let b: Vec<f32> = (0..n * k).map(|i| (i % 7) as f32 - 3.0).collect();
    let expected = humming::reference_gemm_f32(&a, &b, None, m, n, k).unwrap();
    let (da, db) = (ctx.to_device(&a).unwrap(), ctx.to_device(&b).unwrap());
    let mut dc = ctx.alloc(m * n * 4).unwrap();
    let mut params = LaunchParams::new().unwrap();
    kernel.gemm(&mut params, &da, &db, &mut dc, m, n, k, Stream::DEFAULT).unwrap();
    ctx.synchronize(Stream::DEFAULT).unwrap();
    assert_eq!(dc.to_vec::<f32>().unwrap(), expected);
    let e = kernel.gemm(&mut params, &da, &db, &mut dc, m, n + 1, k, Stream::DEFAULT).unwrap_err();
    assert!(e.message().contains("'b'"), "{e}");
}

#[test]
fn plan_lifecycle() {
    let Some(_env) = mock() else {
        return;
    };
    let ctx = context(0);
    let (n, k, m) = (256usize, 256usize, 16usize);
    let format = Format::parse(&format!("w=uint4b8 a=f16 c=f16 s=f16:g128 n={n} k={k}")).unwrap();
    let packed = format.pack(&format.quantize(&vec![0.25f32; n * k]).unwrap()).unwrap();
    let mut plan =
        Plan::new(&ctx, &format, &PlanOptions { max_m: 64, ..Default::default() }).unwrap();
    plan.prepare().unwrap();
    assert!(!plan.describe(m as i64).unwrap().is_empty());
    let ws_bytes = plan.workspace_size(64).unwrap() as usize;
    let workspace = ctx.zeroed(ws_bytes.max(16)).unwrap();
    let a = ctx.alloc(m * k * 2).unwrap();
    let w = ctx.to_device(&packed.weight).unwrap();
    let s = ctx.to_device(&packed.scales).unwrap();
    let mut c = ctx.alloc(m * n * 2).unwrap();
    let mut params = LaunchParams::new().unwrap();
    let args = GemmArgs {
        a: Some(&a),
        weight: Some(&w),
        scales: Some(&s),
        workspace: Some(&workspace),
        ..Default::default()
    };
    plan.gemm(&mut params, &args, &mut c, m, Stream::DEFAULT).unwrap(); // the mock launches, does not compute
    ctx.synchronize(Stream::DEFAULT).unwrap();
    let no_scales = GemmArgs {
        scales: None,
        ..GemmArgs { a: Some(&a), weight: Some(&w), ..Default::default() }
    };
    assert!(plan
        .gemm(&mut params, &no_scales, &mut c, m, Stream::DEFAULT)
        .unwrap_err()
        .message()
        .contains("'scales'"));
    let e = plan.gemm(&mut params, &args, &mut c, 65, Stream::DEFAULT).unwrap_err();
    assert!(e.message().contains("'a'"), "{e}"); // 65 rows do not fit the 16-row buffer
                                                 // A prepared plan is shared between threads, each with its own launch params.
    std::thread::scope(|scope| {
        for _ in 0..2 {
            scope.spawn(|| {
                let mut own = LaunchParams::new().unwrap();
                assert!(plan.describe(8).is_ok());
                let _ = &mut own;
            });
        }
    });
}

#[test]
fn unsupported_arch_and_ahead_of_time() {
    let Some(_env) = mock() else {
        return;
    };
    let sm80 = context(1);
    let f = Format::parse("w=e2m1 a=e2m1 c=f16 s=ue8m0:g32 n=256 k=256").unwrap();
    let e = Plan::new(&sm80, &f, &PlanOptions::default()).err().unwrap();
    assert_eq!(e.category(), sys::HM_ERROR_UNSUPPORTED, "{e}");
    let aot = Context::ahead_of_time("sm_90a").unwrap();
    assert_eq!(aot.device(), sys::HM_NO_DEVICE);
    assert_eq!(aot.device_info().unwrap().arch, "sm_90a");
    assert!(aot.alloc(16).is_err());
    assert!(Context::with_options(&ContextOptions::default())
        .unwrap_err()
        .message()
        .contains("target_arch"));
}

#[test]
fn allocation_failure_reports_device_out_of_memory() {
    let Some(_env) = mock_exclusive() else {
        return;
    };
    let ctx = context(0);
    std::env::set_var("HM_MOCK_FAIL_ALLOC", "1");
    let e = ctx.alloc(64).unwrap_err();
    std::env::remove_var("HM_MOCK_FAIL_ALLOC");
    assert_eq!(e.status(), sys::HM_ERROR_DEVICE_OUT_OF_MEMORY, "{e}");
}

#[test]
fn pack_device_matches_host_pack() {
    let Some(_env) = mock() else {
        return;
    };
    // The mock runs the packer's lane function on the host: the result is the real packing.
    let ctx = context(0);
    let format = Format::parse("w=uint3b4 a=f16 c=f16 s=f16:g64 n=70 k=200 e=2").unwrap();
    let mut canonical = format.empty_canonical().unwrap();
    for (i, c) in canonical.codes.iter_mut().enumerate() {
        *c = ((i * 5 + i / 7) % 8) as u8;
    }
    for (i, s) in canonical.scales.iter_mut().enumerate() {
        *s = 0.25 * ((i % 7) + 1) as f32;
    }
    let expected = format.pack(&canonical).unwrap();
    let scale_codes: Vec<u16> =
        canonical.scales.iter().map(|&s| DType::F16.encode(s as f64).unwrap() as u16).collect();
    let codes = ctx.to_device(&canonical.codes).unwrap();
    let scales = ctx.to_device(&scale_codes).unwrap();
    let mut weight = ctx.alloc(expected.weight.len()).unwrap();
    let mut packed_scales = ctx.alloc(expected.scales.len()).unwrap();
    let input = humming::DeviceCanonical {
        codes: Some(&codes),
        scales: Some(&scales),
        ..Default::default()
    };
    let mut output = humming::DevicePacked {
        weight: Some(&mut weight),
        scales: Some(&mut packed_scales),
        ..Default::default()
    };
    humming::pack_device(&ctx, &format, &input, &mut output, Stream::DEFAULT).unwrap();
    ctx.synchronize(Stream::DEFAULT).unwrap();
    assert_eq!(weight.to_vec::<u8>().unwrap(), expected.weight);
    assert_eq!(packed_scales.to_vec::<u8>().unwrap(), expected.scales);
    let short = humming::DeviceCanonical { codes: Some(&scales), ..Default::default() };
    let mut out = humming::DevicePacked { weight: Some(&mut weight), ..Default::default() };
    let e = humming::pack_device(&ctx, &format, &short, &mut out, Stream::DEFAULT).unwrap_err();
    assert!(e.message().contains("'codes'"), "{e}");
}

#[test]
fn quantize_activation_device_matches_host() {
    let Some(_env) = mock() else {
        return;
    };
    // The mock runs the quantizer's per-row rule on the host: bit for bit the host quantizer.
    let ctx = context(0);
    let (m, k, group_k) = (4usize, 203usize, 16usize);
    let values: Vec<f32> = (0..m * k).map(|i| ((i * 37 % 101) as f32 - 50.0) * 0.125).collect();
    let bits: Vec<u16> = values.iter().map(|&v| (v.to_bits() >> 16) as u16).collect(); // exact bf16
    let a = ctx.to_device(&bits).unwrap();
    let mut codes = ctx.alloc(m * k).unwrap();
    let groups = humming::activation_scale_groups(k, group_k).unwrap();
    assert_eq!(groups, 13);
    let mut scales = ctx.alloc(m * groups * 4).unwrap();
    let input = humming::DeviceActivation { in_dtype: DType::BF16, m, k, a: &a, perm: None };
    humming::quantize_activation_device(
        &ctx,
        &input,
        DType::INT8,
        group_k,
        &mut codes,
        &mut scales,
        Stream::DEFAULT,
    )
    .unwrap();
    ctx.synchronize(Stream::DEFAULT).unwrap();
    let want = humming::quantize_activation(DType::INT8, &values, m, k, group_k).unwrap();
    assert_eq!(codes.to_vec::<u8>().unwrap(), want.codes);
    let got: Vec<u32> = scales.to_vec::<f32>().unwrap().iter().map(|s| s.to_bits()).collect();
    let expected: Vec<u32> = want.scales.iter().map(|s| s.to_bits()).collect();
    assert_eq!(got, expected);
    // group_k 12 (not a multiple of 8) has ceil(203 / 12) = 17 groups: room for them, so that
    // the library's own rule is what refuses it.
    let mut scales17 = ctx.alloc(m * 17 * 4).unwrap();
    let e = humming::quantize_activation_device(
        &ctx,
        &input,
        DType::INT8,
        12,
        &mut codes,
        &mut scales17,
        Stream::DEFAULT,
    )
    .unwrap_err();
    assert!(e.message().contains("multiple of 8"), "{e}");
}

#[test]
fn moe_align_and_reduce() {
    let Some(_env) = mock() else {
        return;
    };
    let ctx = context(0);
    // 5 tokens, top-2, 4 experts, block 8: expert 0 gets flat ids 0, 3, 9; expert 2 gets 1, 4;
    // ids -1 and 7 are dropped.
    let ids: Vec<i32> = vec![0, 2, -1, 0, 2, 7, 3, 3, 1, 0];
    let d_ids = ctx.to_device(&ids).unwrap();
    let routing = humming::MoeRouting {
        topk_ids: Some(&d_ids),
        num_tokens: 5,
        top_k: 2,
        num_experts: 4,
        ..Default::default()
    };
    let s = humming::moe_align_sizes(&routing, 8).unwrap();
    assert_eq!((s.sorted_ids, s.expert_ids, s.expert_offsets), (40, 5, 5));
    let mut sorted = ctx.alloc(s.sorted_ids * 4).unwrap();
    let mut experts = ctx.alloc(s.expert_ids * 4).unwrap();
    let mut padded = ctx.alloc(4).unwrap();
    let mut offsets = ctx.alloc(s.expert_offsets * 4).unwrap();
    let mut out = humming::MoeAlignOut {
        sorted_ids: Some(&mut sorted),
        expert_ids: Some(&mut experts),
        num_tokens_padded: Some(&mut padded),
        expert_offsets: Some(&mut offsets),
        expert_counts: None,
    };
    humming::moe_align(&ctx, &routing, 8, &mut out, Stream::DEFAULT).unwrap();
    ctx.synchronize(Stream::DEFAULT).unwrap();
    let sorted = sorted.to_vec::<i32>().unwrap();
    assert_eq!(&sorted[..8], &[0, 3, 9, 10, 10, 10, 10, 10]);
    assert_eq!(&sorted[8..10], &[8, 10]);
    assert_eq!(&sorted[16..18], &[1, 4]);
    assert_eq!(&sorted[24..26], &[6, 7]);
    assert_eq!(padded.to_vec::<i32>().unwrap(), vec![32]);
    assert_eq!(offsets.to_vec::<i32>().unwrap(), vec![0, 8, 16, 24, 32]);
    assert_eq!(experts.to_vec::<i32>().unwrap(), vec![0, 1, 2, 3, -1]);
    let e = humming::moe_align_sizes(&routing, 12).unwrap_err();
    assert!(e.message().contains("block_size"), "{e}");

    // bf16 values 1.0 (0x3f80) everywhere, weights 0.5: kept pairs sum to 1.0, single ones 0.5.
    let n = 8usize;
    let values = vec![0x3f80u16; 10 * n];
    let weights = vec![0.5f32; 10];
    let (d_values, d_weights) = (ctx.to_device(&values).unwrap(), ctx.to_device(&weights).unwrap());
    let mut d_out = ctx.alloc(5 * n * 2).unwrap();
    humming::moe_reduce(
        &ctx,
        &routing,
        DType::BF16,
        n as i64,
        &d_values,
        &d_weights,
        &mut d_out,
        Stream::DEFAULT,
    )
    .unwrap();
    ctx.synchronize(Stream::DEFAULT).unwrap();
    let got = d_out.to_vec::<u16>().unwrap();
    let want_rows = [0x3f80u16, 0x3f00, 0x3f00, 0x3f80, 0x3f80];
    for t in 0..5 {
        assert!(got[t * n..(t + 1) * n].iter().all(|&x| x == want_rows[t]), "token {t}: {got:?}");
    }
}

#[test]
fn moe_plan_routing_and_gemm_checks() {
    let Some(_env) = mock() else {
        return;
    };
    let ctx = context(0);
    let (e, n, k, m, top_k) = (4usize, 128usize, 256usize, 5usize, 2usize);
    let format = Format::parse("w=uint4b8 a=f16 c=f16 s=f16:g128 n=128 k=256 e=4").unwrap();
    let packed = format.pack(&format.quantize(&vec![0.25f32; e * n * k]).unwrap()).unwrap();
    let mut plan = Plan::new(&ctx, &format, &PlanOptions::default()).unwrap();
    plan.prepare().unwrap();
    let block = plan.moe_block_size(m as i64).unwrap() as usize;
    let rows = plan.moe_rows(m as i64, top_k as i32).unwrap() as usize;
    assert_eq!(rows, (m * top_k + e * (block - 1)).div_ceil(block) * block);
    let a = ctx.alloc(m * k * 2).unwrap();
    let w = ctx.to_device(&packed.weight).unwrap();
    let s = ctx.to_device(&packed.scales).unwrap();
    let mut c = ctx.alloc(m * top_k * n * 2).unwrap();
    let sorted = ctx.alloc(rows * 4).unwrap();
    let experts = ctx.alloc(rows / block * 4).unwrap();
    let padded = ctx.alloc(4).unwrap();
    let mut params = LaunchParams::new().unwrap();
    let args = GemmArgs { a: Some(&a), weight: Some(&w), scales: Some(&s), ..Default::default() };
    let routing = humming::MoeRoutingBuffers {
        sorted_ids: &sorted,
        expert_ids: &experts,
        num_tokens_padded: &padded,
    };
    plan.moe_gemm(&mut params, &args, &routing, &mut c, m, top_k, Stream::DEFAULT).unwrap();
    ctx.synchronize(Stream::DEFAULT).unwrap();
    let short = humming::MoeRoutingBuffers { sorted_ids: &padded, ..routing };
    let err = plan.moe_gemm(&mut params, &args, &short, &mut c, m, top_k, Stream::DEFAULT);
    assert!(err.unwrap_err().message().contains("'sorted_ids'"));
    let err = plan.gemm(&mut params, &args, &mut c, m, Stream::DEFAULT).unwrap_err();
    assert!(err.message().contains("moe_gemm"), "{err}");
}

#[test]
fn moe_plan_grouped_modes() {
    let Some(_env) = mock() else {
        return;
    };
    let ctx = context(0);
    let (e, n, k) = (4usize, 128usize, 256usize);
    let format = Format::parse("w=uint4b8 a=f16 c=f16 s=f16:g128 n=128 k=256 e=4").unwrap();
    let packed = format.pack(&format.quantize(&vec![0.25f32; e * n * k]).unwrap()).unwrap();
    let mut plan = Plan::new(&ctx, &format, &PlanOptions::default()).unwrap();
    plan.prepare().unwrap();
    assert_eq!(humming::Slot::EXPERT_OFFSETS.0, 12);
    assert_eq!(humming::Slot::MASKED_M.0, 13);
    assert_eq!(humming::Slot::MOE_MODE.0, 21);
    let w = ctx.to_device(&packed.weight).unwrap();
    let s = ctx.to_device(&packed.scales).unwrap();
    let mut params = LaunchParams::new().unwrap();

    // Contiguous: M rows grouped by expert, offsets [E + 1].
    let rows = 37usize;
    let a = ctx.alloc(rows * k * 2).unwrap();
    let mut c = ctx.alloc(rows * n * 2).unwrap();
    let offsets = ctx.to_device(&[0i32, 10, 10, 30, 37]).unwrap();
    let args = GemmArgs { a: Some(&a), weight: Some(&w), scales: Some(&s), ..Default::default() };
    plan.moe_gemm_contiguous(&mut params, &args, &offsets, &mut c, rows, Stream::DEFAULT).unwrap();
    ctx.synchronize(Stream::DEFAULT).unwrap();
    let short = ctx.alloc(4 * 4).unwrap();
    let err = plan.moe_gemm_contiguous(&mut params, &args, &short, &mut c, rows, Stream::DEFAULT);
    assert!(err.unwrap_err().message().contains("'expert_offsets'"));
    let err =
        plan.moe_gemm_contiguous(&mut params, &args, &offsets, &mut c, rows + 1, Stream::DEFAULT);
    assert!(err.unwrap_err().message().contains("'a'"));

    // Masked: [E, T_max] slabs, counts [E].
    let t_max = 9usize;
    let a3 = ctx.alloc(e * t_max * k * 2).unwrap();
    let mut c3 = ctx.alloc(e * t_max * n * 2).unwrap();
    let counts = ctx.to_device(&[0i32, 9, 3, 100]).unwrap();
    let args3 = GemmArgs { a: Some(&a3), weight: Some(&w), scales: Some(&s), ..Default::default() };
    plan.moe_gemm_masked(&mut params, &args3, &counts, &mut c3, t_max, Stream::DEFAULT).unwrap();
    ctx.synchronize(Stream::DEFAULT).unwrap();
    let mut tiny = ctx.alloc(n * 2).unwrap();
    let err = plan.moe_gemm_masked(&mut params, &args3, &counts, &mut tiny, t_max, Stream::DEFAULT);
    assert!(err.unwrap_err().message().contains("'c'"));
    let three = ctx.alloc(3 * 4).unwrap();
    let err = plan.moe_gemm_masked(&mut params, &args3, &three, &mut c3, t_max, Stream::DEFAULT);
    assert!(err.unwrap_err().message().contains("'masked_m'"));
}

#[test]
fn gemm_takes_act_scales_with_8_bit_activations_only() {
    let Some(_env) = mock() else {
        return;
    };
    let ctx = context(0);
    let (n, k, m) = (128usize, 256usize, 16usize);
    let act_scales = ctx.alloc(m * 4).unwrap();
    let c = || ctx.alloc(m * n * 2).unwrap();
    let mut params = LaunchParams::new().unwrap();

    // f16 activations have no scales: a buffer given for them is refused before the C call.
    let f16 = Format::parse(&format!("w=uint4b8 a=f16 c=f16 s=f16:g128 n={n} k={k}")).unwrap();
    let packed = f16.pack(&f16.quantize(&vec![0.25f32; n * k]).unwrap()).unwrap();
    let plan = Plan::new(&ctx, &f16, &PlanOptions::default()).unwrap();
    let (a, w, s) = (
        ctx.alloc(m * k * 2).unwrap(),
        ctx.to_device(&packed.weight).unwrap(),
        ctx.to_device(&packed.scales).unwrap(),
    );
    let args = GemmArgs {
        a: Some(&a),
        act_scales: Some(&act_scales),
        weight: Some(&w),
        scales: Some(&s),
        ..Default::default()
    };
    let e = plan.gemm(&mut params, &args, &mut c(), m, Stream::DEFAULT).unwrap_err();
    assert!(e.message().contains("'act_scales' was given"), "{e}");

    // e4m3 activations: A is one code byte per element, and its [M] f32 scales are required.
    let spec = format!("w=e2m1 a=e4m3 c=bf16 s=bf16:channel n={n} k={k}");
    let e4m3 = Format::parse(&spec).unwrap();
    let plan = match Plan::new(&ctx, &e4m3, &PlanOptions::default()) {
        Ok(plan) => plan,
        Err(e) if e.category() == sys::HM_ERROR_UNSUPPORTED => {
            // Until the library has 8-bit activation kernels; plan.rs's unit test
            // act_scales_come_with_8_bit_activations_only covers the same check meanwhile.
            eprintln!("skipped the a=e4m3 sub-case: the library cannot plan \"{spec}\" yet: {e}");
            return;
        }
        Err(e) => panic!("{spec}: {e}"),
    };
    let packed = e4m3.pack(&e4m3.quantize(&vec![0.25f32; n * k]).unwrap()).unwrap();
    let (a, w, s) = (
        ctx.alloc(m * k).unwrap(),
        ctx.to_device(&packed.weight).unwrap(),
        ctx.to_device(&packed.scales).unwrap(),
    );
    let short = ctx.alloc((m - 1) * 4).unwrap();
    let args = GemmArgs { a: Some(&a), weight: Some(&w), scales: Some(&s), ..Default::default() };
    let e = plan.gemm(&mut params, &args, &mut c(), m, Stream::DEFAULT).unwrap_err();
    assert!(e.message().contains("'act_scales' is missing"), "{e}");
    let args = GemmArgs { act_scales: Some(&short), ..args };
    let e = plan.gemm(&mut params, &args, &mut c(), m, Stream::DEFAULT).unwrap_err();
    assert!(e.message().contains("'act_scales' has 60 bytes"), "{e}");
}

#[test]
fn gemm_takes_grouped_act_scales() {
    let Some(_env) = mock() else {
        return;
    };
    let ctx = context(0);
    // Activation groups (a=e4m3:g128): f32 [M][ceil(K / 128)] scales, one per row and K group.
    let (n, k, m) = (256usize, 512usize, 16usize);
    let groups = k.div_ceil(128);
    let spec = format!("w=e4m3 a=e4m3:g128 c=bf16 s=f32:b128x128 n={n} k={k}");
    let fmt = Format::parse(&spec).unwrap();
    assert_eq!(fmt.activation_groups().unwrap(), 128);
    let mut plan = match Plan::new(&ctx, &fmt, &PlanOptions::default()) {
        Ok(plan) => plan,
        Err(e) if e.category() == sys::HM_ERROR_UNSUPPORTED => {
            // plan.rs's unit test grouped_act_scales_need_one_per_row_and_k_group covers the
            // binding's check meanwhile.
            eprintln!("skipped: the library cannot plan \"{spec}\": {e}");
            return;
        }
        Err(e) => panic!("{spec}: {e}"),
    };
    plan.prepare().unwrap();
    let packed = fmt.pack(&fmt.quantize(&vec![0.25f32; n * k]).unwrap()).unwrap();
    let (a, w, s) = (
        ctx.alloc(m * k).unwrap(),
        ctx.to_device(&packed.weight).unwrap(),
        ctx.to_device(&packed.scales).unwrap(),
    );
    let mut c = ctx.alloc(m * n * 2).unwrap();
    let mut params = LaunchParams::new().unwrap();
    let args = GemmArgs { a: Some(&a), weight: Some(&w), scales: Some(&s), ..Default::default() };
    let e = plan.gemm(&mut params, &args, &mut c, m, Stream::DEFAULT).unwrap_err();
    assert!(e.message().contains("'act_scales' is missing"), "{e}");
    assert!(e.message().contains(&format!("[M][{groups}]")), "{e}");
    // Per-token scales ([M]) are too few for a grouped format.
    let per_row = ctx.alloc(m * 4).unwrap();
    let short_args = GemmArgs { act_scales: Some(&per_row), ..args };
    let e = plan.gemm(&mut params, &short_args, &mut c, m, Stream::DEFAULT).unwrap_err();
    assert!(e.message().contains("'act_scales' has 64 bytes"), "{e}");
    let grouped = ctx.alloc(m * groups * 4).unwrap();
    let ws_bytes = plan.workspace_size(m as i64).unwrap() as usize;
    let workspace = ctx.zeroed(ws_bytes.max(16)).unwrap();
    let args = GemmArgs { act_scales: Some(&grouped), workspace: Some(&workspace), ..args };
    plan.gemm(&mut params, &args, &mut c, m, Stream::DEFAULT).unwrap();
    ctx.synchronize(Stream::DEFAULT).unwrap();
}

#[test]
fn moe_masked_act_scales_cover_every_slab_row() {
    let Some(_env) = mock() else {
        return;
    };
    let ctx = context(0);
    // 8-bit activations on a MoE format: the masked mode reads A as E * t_max rows, and one
    // activation scale per row of A, not per t_max.
    let (e, n, k, t_max) = (4usize, 128usize, 256usize, 9usize);
    let spec = format!("w=uint4b8 a=e4m3 c=f16 s=f16:g128 n={n} k={k} e={e}");
    let format = Format::parse(&spec).unwrap();
    let mut plan = Plan::new(&ctx, &format, &PlanOptions::default()).unwrap();
    plan.prepare().unwrap();
    let packed = format.pack(&format.quantize(&vec![0.25f32; e * n * k]).unwrap()).unwrap();
    let w = ctx.to_device(&packed.weight).unwrap();
    let s = ctx.to_device(&packed.scales).unwrap();
    let a = ctx.alloc(e * t_max * k).unwrap();
    let mut c = ctx.alloc(e * t_max * n * 2).unwrap();
    let counts = ctx.to_device(&[0i32, 9, 3, 100]).unwrap();
    let mut params = LaunchParams::new().unwrap();
    let per_slab_row = ctx.alloc(t_max * 4).unwrap();
    let args = GemmArgs {
        a: Some(&a),
        weight: Some(&w),
        scales: Some(&s),
        act_scales: Some(&per_slab_row),
        ..Default::default()
    };
    let err = plan.moe_gemm_masked(&mut params, &args, &counts, &mut c, t_max, Stream::DEFAULT);
    let err = err.unwrap_err();
    assert!(err.message().contains("'act_scales' has 36 bytes"), "{err}");
    let every_row = ctx.alloc(e * t_max * 4).unwrap();
    let args = GemmArgs { act_scales: Some(&every_row), ..args };
    plan.moe_gemm_masked(&mut params, &args, &counts, &mut c, t_max, Stream::DEFAULT).unwrap();
    ctx.synchronize(Stream::DEFAULT).unwrap();
}
