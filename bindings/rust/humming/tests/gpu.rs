//! GPU runs (ignored by default: CTest's bindings_rust_gpu runs them with --ignored, and only
//! where a CUDA device is present; elsewhere it reports them skipped).
use humming::{Context, DType, Format, GemmArgs, LaunchParams, Plan, PlanOptions, Stream};

fn f16(v: f32) -> u16 {
    DType::F16.encode(v as f64).unwrap() as u16
}

fn from_f16(h: u16) -> f32 {
    DType::F16.decode(h as u32).unwrap() as f32
}

#[test]
#[ignore = "needs a GPU (CTest: bindings_rust_gpu)"]
fn reference_kernel_f16_is_exact() {
    let ctx = Context::new(0).unwrap();
    let (m, n, k) = (33usize, 47usize, 64usize);
    let a: Vec<f32> = (0..m * k).map(|i| (i % 7) as f32 - 3.0).collect();
    let b: Vec<f32> = (0..n * k).map(|i| (i % 5) as f32 - 2.0).collect();
    let expected = humming::reference_gemm_f32(&a, &b, None, m, n, k).unwrap();
    let kernel = ctx.reference_gemm_kernel(DType::F16, DType::F32).unwrap();
    let da = ctx.to_device(&a.iter().map(|&x| f16(x)).collect::<Vec<_>>()).unwrap();
    let db = ctx.to_device(&b.iter().map(|&x| f16(x)).collect::<Vec<_>>()).unwrap();
    let mut dc = ctx.alloc(m * n * 4).unwrap();
    kernel
        .gemm(&mut LaunchParams::new().unwrap(), &da, &db, &mut dc, m, n, k, Stream::DEFAULT)
        .unwrap();
    ctx.synchronize(Stream::DEFAULT).unwrap();
    assert_eq!(dc.to_vec::<f32>().unwrap(), expected);
}

#[test]
#[ignore = "needs a GPU (CTest: bindings_rust_gpu)"]
fn plan_gemm_matches_the_dequantized_reference() {
    let ctx = Context::new(0).unwrap();
    let (n, k) = (256usize, 512usize);
    let format = Format::parse(&format!("w=uint4b8 a=f16 c=f16 s=f16:g128 n={n} k={k}")).unwrap();
    let w: Vec<f32> =
        (0..n * k).map(|i| (((i * 2654435761usize) % 1000) as f32 / 500.0) - 1.0).collect();
    let q = format.quantize(&w).unwrap();
    let deq = format.dequantize(&q).unwrap();
    let packed = format.pack(&q).unwrap();
    let mut plan =
        Plan::new(&ctx, &format, &PlanOptions { max_m: 64, ..Default::default() }).unwrap();
    plan.prepare().unwrap();
    let dw = ctx.to_device(&packed.weight).unwrap();
    let ds = ctx.to_device(&packed.scales).unwrap();
    let workspace = ctx.zeroed((plan.workspace_size(64).unwrap() as usize).max(16)).unwrap();
    let mut params = LaunchParams::new().unwrap();
    for m in [1usize, 16, 37, 64] {
        let a: Vec<u16> = (0..m * k).map(|i| f16(((i * 40503) % 97) as f32 / 48.0 - 1.0)).collect();
        let a32: Vec<f32> = a.iter().map(|&h| from_f16(h)).collect();
        let expected = humming::reference_gemm_f32(&a32, &deq, None, m, n, k).unwrap();
        let da = ctx.to_device(&a).unwrap();
        let mut dc = ctx.alloc(m * n * 2).unwrap();
        let args = GemmArgs {
            a: Some(&da),
            weight: Some(&dw),
            scales: Some(&ds),
            workspace: Some(&workspace),
            ..Default::default()
        };
        plan.gemm(&mut params, &args, &mut dc, m, Stream::DEFAULT).unwrap();
        ctx.synchronize(Stream::DEFAULT).unwrap();
        let got: Vec<f32> = dc.to_vec::<u16>().unwrap().into_iter().map(from_f16).collect();
        let (mut diff, mut norm) = (0f64, 0f64);
        for (g, e) in got.iter().zip(&expected) {
            diff += ((g - e) as f64).powi(2);
            norm += (*e as f64).powi(2);
        }
        let error = (diff / norm).sqrt();
        assert!(
            error < 2e-3,
            "M={m}: relative error {error:.2e} ({})",
            plan.describe(m as i64).unwrap()
        );
    }
}
