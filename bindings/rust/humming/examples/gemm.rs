//! Quantize a weight, pack it, prepare a plan and run one GEMM on GPU 0, then show an error.
//!
//!   HUMMING_LIB_DIR=/path/to/build cargo run --example gemm
use humming::{Context, DType, Format, GemmArgs, LaunchParams, Plan, PlanOptions, Stream};

fn main() -> humming::Result<()> {
    // 1. A layer format: 4-bit weights (implicit zero point 8), f16 activations and output,
    //    one f16 scale per 128 inputs; N = 256 outputs, K = 512 inputs.
    let (n, k, m) = (256usize, 512usize, 16usize);
    let format = Format::parse(&format!("w=uint4b8 a=f16 c=f16 s=f16:g128 n={n} k={k}"))?;

    // 2. Quantize an f32 weight [N][K] on the host and pack it into the standard layout.
    let weight: Vec<f32> = (0..n * k).map(|i| ((i * 7919) % 13) as f32 / 13.0 - 0.5).collect();
    let canonical = format.quantize(&weight)?;
    let packed = format.pack(&canonical)?;

    // 3. A context on device 0 and a plan for the layer, compiled once before serving.
    let ctx = match Context::new(0) {
        Ok(ctx) => ctx,
        Err(e) => {
            // 5. Errors carry the status and the library's message.
            eprintln!("no GPU here: {} ({}): {}", e.name(), e.status(), e.message());
            return Ok(());
        }
    };
    let mut plan =
        Plan::new(&ctx, &format, &PlanOptions { max_m: m as i64, ..Default::default() })?;
    plan.prepare()?;
    println!("M = {m} runs {}", plan.describe(m as i64)?);

    // 4. Upload, run C[M,N] = A[M,K] * dequant(W)^T on the default stream, read C back.
    let a_host: Vec<u16> = (0..m * k)
        .map(|i| DType::F16.encode(((i % 5) as f64 - 2.0) / 4.0).unwrap() as u16)
        .collect();
    let a = ctx.to_device(&a_host)?;
    let w = ctx.to_device(&packed.weight)?;
    let scales = ctx.to_device(&packed.scales)?;
    let workspace = ctx.zeroed(plan.workspace_size(m as i64)? as usize)?;
    let mut c = ctx.alloc(m * n * 2)?;
    let args = GemmArgs {
        a: Some(&a),
        weight: Some(&w),
        scales: Some(&scales),
        workspace: Some(&workspace),
        ..Default::default()
    };
    let mut params = LaunchParams::new()?;
    plan.gemm(&mut params, &args, &mut c, m, Stream::DEFAULT)?;
    ctx.synchronize(Stream::DEFAULT)?;
    let c_host: Vec<u16> = c.to_vec()?;
    println!(
        "C[0][0..4] = {:?}",
        c_host[..4].iter().map(|&h| DType::F16.decode(h as u32).unwrap()).collect::<Vec<_>>()
    );

    // 5. A failing call: the error names the problem.
    if let Err(e) = Format::parse("w=int4 bogus") {
        println!("as expected: {e}");
    }
    Ok(())
}
