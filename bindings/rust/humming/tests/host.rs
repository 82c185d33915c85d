//! Host paths of the safe crate: versions, errors, dtypes, formats, quantization and packing,
//! the reference GEMM, activation quantization, checkpoint conversion.
use humming::{
    sys, CheckpointTensor, ConvertOptions, DType, DevicePtr, Error, Format, LaunchParams, Role,
    Slot,
};

fn header() -> String {
    let path = std::env::var("HUMMING_HEADER").unwrap_or_else(|_| {
        concat!(env!("CARGO_MANIFEST_DIR"), "/../../../include/humming.h").into()
    });
    std::fs::read_to_string(path).expect("read include/humming.h")
}

fn define(text: &str, name: &str) -> u32 {
    let line = text.lines().find(|l| l.starts_with(&format!("#define {name} "))).expect(name);
    line.split_whitespace().nth(2).unwrap().parse().unwrap()
}

#[test]
fn version_matches_the_header() {
    let h = header();
    let expected = (
        define(&h, "HM_VERSION_MAJOR"),
        define(&h, "HM_VERSION_MINOR"),
        define(&h, "HM_VERSION_PATCH"),
    );
    assert_eq!(humming::version(), expected);
    assert_eq!(humming::version_string(), format!("{}.{}.{}", expected.0, expected.1, expected.2));
    assert_eq!(humming::abi_version(), define(&h, "HM_ABI_VERSION"));
}

#[test]
fn act_scales_slot_is_the_headers() {
    // A new pointer slot (8-bit activations' per-token scales), taken by launch params.
    assert_eq!(Slot::ACT_SCALES.0, 11);
    assert_eq!(Slot::ACT_SCALES.0 as u32, define(&header(), "HM_ARG_ACT_SCALES"));
    let mut params = LaunchParams::new().unwrap();
    params.set_pointer(Slot::ACT_SCALES, DevicePtr(0x1000)).unwrap();
}

#[test]
fn errors_carry_status_name_and_message() {
    let e: Error = Format::parse("w=int4 bogus").unwrap_err();
    assert_eq!(e.status(), sys::HM_ERROR_PARSE);
    assert_eq!(e.name(), "ERROR_PARSE");
    assert_eq!(e.category(), sys::HM_ERROR_INVALID_ARGUMENT);
    assert!(e.message().contains("bogus"), "{e}");
    assert!(e.to_string().starts_with("ERROR_PARSE (1003): hm_format_parse"), "{e}");
    assert_eq!(humming::status_name(424242), "UNKNOWN");
}

#[test]
fn messages_are_per_thread() {
    let _ = DType::parse("not-a-dtype").unwrap_err();
    assert!(humming::last_error_message().contains("not-a-dtype"));
    let other = std::thread::spawn(humming::last_error_message).join().unwrap();
    assert_eq!(other, "");
    humming::clear_last_error();
    assert_eq!(humming::last_error_message(), "");
    // Threads failing at once each read their own message.
    let handles: Vec<_> = (0..4)
        .map(|i| {
            std::thread::spawn(move || {
                for _ in 0..200 {
                    let e = Format::parse(&format!("w=int4 thread{i}=1")).unwrap_err();
                    assert!(e.message().contains(&format!("thread{i}")), "{e}");
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
}

#[test]
fn dtypes() {
    for (name, d) in [
        ("f16", DType::F16),
        ("bf16", DType::BF16),
        ("e4m3", DType::E4M3),
        ("uint4b8", DType::UINT4B8),
    ] {
        assert_eq!(DType::parse(name).unwrap(), d);
        assert_eq!(d.name().unwrap(), name);
    }
    assert_eq!("fp16".parse::<DType>().unwrap(), DType::F16);
    for code in 0..256u32 {
        let v = DType::E4M3.decode(code).unwrap();
        if !v.is_nan() {
            assert_eq!(DType::E4M3.decode(DType::E4M3.encode(v).unwrap()).unwrap(), v);
        }
    }
    assert_eq!(DType::parse("f17").unwrap_err().status(), sys::HM_ERROR_PARSE);
}

#[test]
fn formats() {
    let text = "w=int4 a=bf16 c=bf16 s=bf16:g64 zp=none bias=1 acc=f32 n=512 k=1024 e=1";
    let f = Format::parse(text).unwrap();
    assert_eq!(f.to_string(), text);
    assert_eq!(f.shape().unwrap(), (512, 1024, 1));
    assert!(f.bias().unwrap());
    assert_eq!(f.scale().unwrap().group_k, 64);
    let mut g = f.clone();
    assert_eq!(g, f);
    g.set_shape(128, 256, 1).unwrap();
    g.set_dtype(Role::WEIGHT, DType::INT8).unwrap();
    g.set_scale(sys::HM_SCALE_CHANNEL, 0, 0).unwrap();
    g.set_bias(false).unwrap();
    assert_ne!(g, f);
    assert_eq!(f.shape().unwrap(), (512, 1024, 1));
    assert_eq!(g.dtype(Role::WEIGHT).unwrap(), DType::INT8);
    assert_eq!(Format::new().unwrap().dtype(Role::WEIGHT).unwrap(), DType::UINT4B8);
    assert!(g.set_dtype(Role(99), DType::F16).is_err());

    // Activation groups (per-token x K-group activation scales, "a=e4m3:g128").
    let mut a = Format::parse("w=e4m3 a=e4m3 c=bf16 s=f32:b128x128 n=256 k=512").unwrap();
    assert_eq!(a.activation_groups().unwrap(), 0);
    a.set_activation_groups(128).unwrap();
    assert_eq!(a.activation_groups().unwrap(), 128);
    assert!(a.to_string().contains("a=e4m3:g128"), "{a}");
    assert_eq!(Format::parse(&a.to_string()).unwrap().activation_groups().unwrap(), 128);
    a.validate(Some("sm_90a")).unwrap();
    let e = a.set_activation_groups(-1).unwrap_err();
    assert_eq!(e.status(), sys::HM_ERROR_INVALID_ARGUMENT);
    assert!(e.message().contains("'group_k' is -1"), "{e}");
    assert_eq!(a.activation_groups().unwrap(), 128);
    Format::parse("w=uint4b8 a=f16 n=256 k=256").unwrap().validate(Some("sm_90a")).unwrap();
    let e = Format::parse("w=e2m1 a=e2m1 c=f16 s=ue8m0:g32 n=256 k=256")
        .unwrap()
        .validate(Some("sm_80"))
        .unwrap_err();
    assert_eq!(e.category(), sys::HM_ERROR_UNSUPPORTED, "{e}");
    let int4 = Format::parse("w=uint4b8 a=f16 n=256 k=256").unwrap();
    assert_eq!(int4.kernels(Some("sm_90a")).unwrap(), ["dense_wgmma", "dense_mma"]);
    assert_eq!(int4.kernels(Some("sm_80")).unwrap(), ["dense_mma"]);
    let fp8 = Format::parse("w=e4m3 a=e4m3 c=bf16 s=f32:channel n=256 k=256").unwrap();
    assert_eq!(fp8.kernels(Some("sm_90a")).unwrap(), ["dense_wgmma", "dense_mma"]);
    assert_eq!(fp8.kernels(Some("sm_89")).unwrap(), ["dense_mma"]);
    // Valid, but no kernel yet: the error names what is missing.
    let fp8_groups = Format::parse("w=uint4b8 a=e4m3 c=f16 s=f16:g96 n=256 k=256").unwrap();
    let e = fp8_groups.kernels(Some("sm_90a")).unwrap_err();
    assert_eq!(e.status(), sys::HM_ERROR_UNSUPPORTED, "{e}");
    assert!(e.message().contains("e4m3 activations"), "{e}");
    assert!(humming::support_matrix().unwrap().len() > 256);
}

#[test]
fn quantize_pack_unpack_dequantize() {
    let (n, k) = (256usize, 512usize);
    let f = Format::parse(&format!("w=uint4b8 a=f16 s=f16:g128 n={n} k={k}")).unwrap();
    let w: Vec<f32> =
        (0..n * k).map(|i| (((i * 2654435761usize) % 1000) as f32 / 500.0) - 1.0).collect();
    let q = f.quantize(&w).unwrap();
    assert_eq!(q.codes.len(), n * k);
    assert_eq!(q.scales.len(), n * k / 128);
    let packed = f.pack(&q).unwrap();
    assert_eq!(packed.weight.len(), f.packed_sizes().unwrap().weight);
    assert_eq!(f.unpack(&packed).unwrap(), q);
    let d = f.dequantize(&q).unwrap();
    for (i, (&x, &y)) in w.iter().zip(&d).enumerate() {
        let step = q.scales[i / 128];
        assert!((x - y).abs() <= 0.5 * step * 1.001 + 1e-7, "element {i}: {x} vs {y}");
    }
    // f16 bit patterns quantize like their f32 values.
    let halves: Vec<u16> = w.iter().map(|&x| DType::F16.encode(x as f64).unwrap() as u16).collect();
    let widened: Vec<f32> =
        halves.iter().map(|&h| DType::F16.decode(h as u32).unwrap() as f32).collect();
    assert_eq!(f.quantize_bits16(&halves, DType::F16).unwrap(), f.quantize(&widened).unwrap());
    // Wrong sizes are refused before the call, naming the buffer.
    let e = f.quantize(&w[1..]).unwrap_err();
    assert!(e.message().contains("'weight'"), "{e}");
    let mut bad = q.clone();
    bad.scales.pop();
    assert!(f.pack(&bad).unwrap_err().message().contains("'scales'"));
}

#[test]
fn reference_gemm_and_activations() {
    let a = [1f32, 2., 3., 4., 5., 6.];
    let w = [1f32; 12];
    let c = humming::reference_gemm_f32(&a, &w, Some(&[0.5; 4]), 2, 4, 3).unwrap();
    assert_eq!(c, vec![6.5, 6.5, 6.5, 6.5, 15.5, 15.5, 15.5, 15.5]);
    assert!(humming::reference_gemm_f32(&a, &w, None, 2, 4, 4).is_err());
    let x: Vec<f32> = (0..5 * 64).map(|i| ((i % 17) as f32 - 8.0) / 3.0).collect();
    let q = humming::quantize_activation(DType::INT8, &x, 5, 64, 0).unwrap();
    assert_eq!((q.codes.len(), q.scales.len()), (5 * 64, 5));
    let back = humming::dequantize_activation(DType::INT8, &q, 5, 64, 0).unwrap();
    for (i, (&v, &b)) in x.iter().zip(&back).enumerate() {
        assert!((v - b).abs() <= 0.5 * q.scales[i / 64] * 1.001, "{i}: {v} vs {b}");
    }
    let e = humming::quantize_activation(DType::F16, &x, 5, 64, 0).unwrap_err();
    assert_eq!(e.category(), sys::HM_ERROR_UNSUPPORTED);
    // A group beyond the ABI's int32_t is refused, not truncated (the scales were sized from
    // the wide value and the library wrote k / 8 of them per row: a heap overflow).
    let e = humming::quantize_activation(DType::E4M3, &x, 5, 64, (1usize << 32) + 8).unwrap_err();
    assert!(e.message().contains("beyond the C ABI's int32_t"), "{e}");
    assert!(humming::dequantize_activation(DType::INT8, &q, 5, 64, (1usize << 32) + 8).is_err());
    // Sizes whose product overflows are refused before any check could pass on a wrapped value.
    let e = humming::quantize_activation(DType::INT8, &x, usize::MAX / 2, 4, 0).unwrap_err();
    assert!(e.message().contains("overflows"), "{e}");
}

/// A 4-bit GPTQ layer (v1 zeros) packed the way GPTQ packs it, and the weight it stands for.
fn gptq(n: usize, k: usize, group: usize) -> (Vec<u8>, Vec<u8>, Vec<u8>, Vec<f32>) {
    let groups = k / group;
    let q = |nn: usize, kk: usize| ((nn * 31 + kk * 17) % 16) as u32;
    let z = |g: usize, nn: usize| 1 + ((g * 5 + nn * 3) % 15) as u32;
    let s = |g: usize, nn: usize| 2f32.powi(-(((g + nn) % 4) as i32) - 3);
    let mut qweight = Vec::new();
    for r in 0..k / 8 {
        for nn in 0..n {
            let word = (0..8).fold(0u32, |w, j| w | q(nn, 8 * r + j) << (4 * j));
            qweight.extend_from_slice(&word.to_le_bytes());
        }
    }
    let mut qzeros = Vec::new();
    let mut scales = Vec::new();
    for g in 0..groups {
        for wi in 0..n / 8 {
            let word = (0..8).fold(0u32, |w, j| w | (z(g, 8 * wi + j) - 1) << (4 * j));
            qzeros.extend_from_slice(&word.to_le_bytes());
        }
        for nn in 0..n {
            let h = DType::F16.encode(s(g, nn) as f64).unwrap() as u16;
            scales.extend_from_slice(&h.to_le_bytes());
        }
    }
    let mut w = Vec::new();
    for nn in 0..n {
        for kk in 0..k {
            let g = kk / group;
            w.push((q(nn, kk) as f32 - z(g, nn) as f32) * s(g, nn));
        }
    }
    (qweight, qzeros, scales, w)
}

/// gptq()'s buffers (groups of 128) as the checkpoint tensors of one layer.
fn gptq_tensors<'a>(
    n: usize,
    k: usize,
    qweight: &'a [u8],
    qzeros: &'a [u8],
    scales: &'a [u8],
) -> [CheckpointTensor<'a>; 3] {
    let groups = (k / 128) as i64;
    [
        CheckpointTensor {
            name: "qweight",
            dtype: "I32",
            shape: vec![(k / 8) as i64, n as i64],
            data: qweight,
        },
        CheckpointTensor {
            name: "qzeros",
            dtype: "I32",
            shape: vec![groups, (n / 8) as i64],
            data: qzeros,
        },
        CheckpointTensor {
            name: "scales",
            dtype: "F16",
            shape: vec![groups, n as i64],
            data: scales,
        },
    ]
}

#[test]
fn gptq_conversion_is_exact() {
    assert_eq!(humming::scheme_parse("gptq").unwrap(), sys::HM_SCHEME_GPTQ);
    assert_eq!(humming::scheme_parse("nope").unwrap_err().status(), sys::HM_ERROR_PARSE);
    let (n, k) = (64usize, 256usize);
    let (qweight, qzeros, scales, w) = gptq(n, k, 128);
    let tensors = gptq_tensors(n, k, &qweight, &qzeros, &scales);
    let layer =
        humming::convert_layer(sys::HM_SCHEME_GPTQ, &tensors, &ConvertOptions::default()).unwrap();
    let format = layer.format().unwrap();
    assert_eq!(format.shape().unwrap(), (n as i64, k as i64, 1));
    assert!(layer.bias.is_empty() && layer.k_permutation.is_empty() && layer.note.is_none());
    assert_eq!(format.dequantize(&layer.canonical).unwrap(), w);
    let e = humming::convert_layer(sys::HM_SCHEME_GPTQ, &tensors[..2], &ConvertOptions::default())
        .err()
        .unwrap();
    assert!(e.message().contains("scales"), "{e}");
    let e = humming::convert_file(
        "gptq",
        "/nonexistent/in.safetensors".as_ref(),
        "/tmp/out.safetensors".as_ref(),
        &ConvertOptions::default(),
        None,
    )
    .unwrap_err();
    assert!(e.message().contains("/nonexistent/in.safetensors"), "{e}");
}

#[test]
fn experts_stack_into_one_moe_layer_and_rows_into_gate_up() {
    let (n, k) = (64usize, 256usize);
    let (qweight, qzeros, scales, w) = gptq(n, k, 128);
    let tensors = gptq_tensors(n, k, &qweight, &qzeros, &scales);
    let one =
        humming::convert_layer(sys::HM_SCHEME_GPTQ, &tensors, &ConvertOptions::default()).unwrap();
    // Three experts: E = 3, each expert's canonical weight the layer's own.
    let moe = humming::stack_layers(&[&one, &one, &one], humming::StackAxis::Experts).unwrap();
    let format = moe.format().unwrap();
    assert_eq!(format.shape().unwrap(), (n as i64, k as i64, 3));
    let deq = format.dequantize(&moe.canonical).unwrap();
    assert_eq!(deq.len(), 3 * w.len());
    for e in 0..3 {
        assert_eq!(&deq[e * w.len()..(e + 1) * w.len()], &w[..], "expert {e}");
    }
    // Rows: N = 2n per expert, the first layer's rows first.
    let gate_up = humming::stack_layers(&[&moe, &moe], humming::StackAxis::Rows).unwrap();
    assert_eq!(gate_up.format().unwrap().shape().unwrap(), (2 * n as i64, k as i64, 3));
    // One layer is not a stack; another E is not rows of the same experts.
    let e = humming::stack_layers(&[&one], humming::StackAxis::Experts).unwrap_err();
    assert!(e.message().contains("at least two"), "{e}");
    let e = humming::stack_layers(&[&moe, &one], humming::StackAxis::Rows).unwrap_err();
    assert!(e.message().contains("in more than n"), "{e}");
}

/// A safetensors file: an 8-byte little-endian header length, the JSON header, the data.
fn write_safetensors(path: &std::path::Path, tensors: &[(&str, &str, Vec<i64>, &[u8])]) {
    let (mut header, mut data) = (Vec::new(), Vec::new());
    for (name, dtype, shape, bytes) in tensors {
        let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
        header.push(format!(
            "\"{name}\":{{\"dtype\":\"{dtype}\",\"shape\":[{}],\"data_offsets\":[{},{}]}}",
            dims.join(","),
            data.len(),
            data.len() + bytes.len()
        ));
        data.extend_from_slice(bytes);
    }
    let mut text = format!("{{{}}}", header.join(",")).into_bytes();
    while text.len() % 8 != 0 {
        text.push(b' ');
    }
    let mut out = (text.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(&text);
    out.extend_from_slice(&data);
    std::fs::write(path, out).unwrap();
}

#[test]
fn convert_file_with_progress() {
    let (n, k) = (64usize, 256usize);
    let (qweight, qzeros, scales, _) = gptq(n, k, 128);
    let dir = std::env::temp_dir().join(format!("humming-rust-convert-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (input, output) = (dir.join("in.safetensors"), dir.join("out.safetensors"));
    let p = "model.layers.0.mlp.down_proj";
    write_safetensors(
        &input,
        &[
            (&format!("{p}.qweight"), "I32", vec![(k / 8) as i64, n as i64], &qweight),
            (&format!("{p}.qzeros"), "I32", vec![2, (n / 8) as i64], &qzeros),
            (&format!("{p}.scales"), "F16", vec![2, n as i64], &scales),
            ("model.norm.weight", "F16", vec![4], &[0u8; 8]),
        ],
    );
    let mut calls: Vec<(String, u64, u64)> = Vec::new();
    let mut record =
        |name: &str, done: u64, total: u64| calls.push((name.to_string(), done, total));
    humming::convert_file("gptq", &input, &output, &ConvertOptions::default(), Some(&mut record))
        .unwrap();
    assert!(calls.iter().any(|c| c.0 == p), "{calls:?}");
    assert!(calls.iter().any(|c| c.0 == "model.norm.weight"), "{calls:?}");
    let last = calls.last().unwrap();
    assert!(last.1 == last.2 && last.2 > 0, "{calls:?}");
    let data = std::fs::read(&output).unwrap();
    let length = u64::from_le_bytes(data[..8].try_into().unwrap()) as usize;
    let header = String::from_utf8_lossy(&data[8..8 + length]).into_owned();
    let key = format!("\"humming.format.{p}\":\"");
    let start = header.find(&key).expect(&header) + key.len();
    let text = &header[start..start + header[start..].find('"').unwrap()];
    assert_eq!(Format::parse(text).unwrap().shape().unwrap(), (n as i64, k as i64, 1));
    // A panic in the callback stops the conversion (nothing written) and is resumed after it;
    // the callback is not called again.
    let again = dir.join("again.safetensors");
    let mut seen = 0;
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let mut fail = |_: &str, _: u64, _: u64| {
            seen += 1;
            panic!("stop");
        };
        let _ = humming::convert_file("gptq", &input, &again, &ConvertOptions::default(), Some(&mut fail));
    }));
    assert!(caught.is_err(), "the panic comes back");
    assert_eq!(seen, 1);
    let mut names: Vec<_> =
        std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    names.sort();
    assert_eq!(names, ["in.safetensors", "out.safetensors"]);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn convert_model_folder() {
    let (n, k) = (64usize, 256usize);
    let (qweight, qzeros, scales, _) = gptq(n, k, 128);
    let dir = std::env::temp_dir().join(format!("humming-rust-model-{}", std::process::id()));
    let (input, output) = (dir.join("in"), dir.join("out"));
    std::fs::create_dir_all(&input).unwrap();
    let p = "model.layers.0.mlp.down_proj";
    write_safetensors(
        &input.join("model.safetensors"),
        &[
            (&format!("{p}.qweight"), "I32", vec![(k / 8) as i64, n as i64], &qweight),
            (&format!("{p}.qzeros"), "I32", vec![2, (n / 8) as i64], &qzeros),
            (&format!("{p}.scales"), "F16", vec![2, n as i64], &scales),
            ("model.norm.weight", "F16", vec![4], &[0u8; 8]),
        ],
    );
    std::fs::write(
        input.join("config.json"),
        r#"{"quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": 128,
            "sym": false, "meta": {"quantizer": ["auto_gptq:0.7.1"]}}}"#,
    )
    .unwrap();
    std::fs::write(input.join("tokenizer.json"), "{}").unwrap();
    let mut layers = Vec::new();
    let mut record = |kind: humming::ModelEvent, name: &str, _: Option<&str>, _: u64, _: u64| {
        if kind == humming::sys::HM_CONVERT_EVENT_LAYER as i32 {
            layers.push(name.to_string());
        }
        false
    };
    let options = humming::ConvertModelOptions { threads: 2, ..Default::default() };
    let summary = humming::convert_model(&input, &output, &options, Some(&mut record)).unwrap();
    assert_eq!((summary.layers, summary.tensors, summary.files), (1, 1, 1));
    assert_eq!(layers, vec![p.to_string()]);
    assert!(output.join("tokenizer.json").exists());
    let config = std::fs::read_to_string(output.join("config.json")).unwrap();
    assert!(config.contains("\"quant_method\": \"humming\""), "{config}");
    // Read back: the layer the converter made, byte for byte.
    let stored = humming::StoredModel::open(&output).unwrap();
    assert_eq!(stored.layers(), &[p.to_string()]);
    let layer = stored.read(p).unwrap();
    let converted = humming::convert_layer(
        humming::scheme_parse("gptq").unwrap(),
        &[
            humming::CheckpointTensor {
                name: "qweight",
                dtype: "I32",
                shape: vec![(k / 8) as i64, n as i64],
                data: &qweight,
            },
            humming::CheckpointTensor {
                name: "qzeros",
                dtype: "I32",
                shape: vec![2, (n / 8) as i64],
                data: &qzeros,
            },
            humming::CheckpointTensor {
                name: "scales",
                dtype: "F16",
                shape: vec![2, n as i64],
                data: &scales,
            },
        ],
        &humming::ConvertOptions {
            // As the folder's config says: AutoGPTQ's v1 zeros, sym: false.
            flags: (humming::sys::HM_CONVERT_GPTQ_V1_AUTOGPTQ | humming::sys::HM_CONVERT_ASYMMETRIC)
                as u32,
            ..Default::default()
        },
    )
    .unwrap();
    let format = converted.format().unwrap();
    assert_eq!(layer.format.to_string(), format.to_string());
    assert_eq!(stored.format(p).unwrap().to_string(), format.to_string());
    assert_eq!(layer.packed, format.pack(&converted.canonical).unwrap());
    assert!(layer.bias.is_empty() && layer.k_permutation.is_empty() && layer.note.is_none());
    assert!(stored.read("model.layers.9.mlp.down_proj").is_err());
    // The output exists now: refused without the force flag; cancelling writes nothing.
    assert!(humming::convert_model(&input, &output, &options, None).is_err());
    let mut cancel = |_: humming::ModelEvent, _: &str, _: Option<&str>, _: u64, _: u64| true;
    let other = dir.join("cancelled");
    assert!(humming::convert_model(&input, &other, &options, Some(&mut cancel)).is_err());
    assert!(!other.exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A cache entry laid out by hand, last used 30 days ago: pruned by age, kept by a longer one.
#[test]
fn cache_prune_removes_entries_unused_for_the_age() {
    let dir = std::env::temp_dir().join(format!("hm_rust_prune_{}", std::process::id()));
    let entry = dir.join("v1/sm_90a/ab/ab01");
    std::fs::create_dir_all(&entry).unwrap();
    std::fs::write(entry.join("kernel.cubin"), [b'x'; 100]).unwrap();
    let meta = entry.join("meta.json");
    std::fs::write(&meta, b"{}").unwrap();
    let old = std::time::SystemTime::now() - std::time::Duration::from_secs(30 * 86400);
    std::fs::File::options().write(true).open(&meta).unwrap().set_modified(old).unwrap();
    let day = std::time::Duration::from_secs(86400);
    let kept = humming::cache_prune(Some(&dir), Some(day * 40), None).unwrap();
    assert_eq!(kept, humming::CachePruned { entries: 0, bytes: 0 });
    let pruned = humming::cache_prune(Some(&dir), Some(day), None).unwrap();
    assert_eq!(pruned, humming::CachePruned { entries: 1, bytes: 102 });
    assert!(!entry.exists());
    std::fs::remove_dir_all(&dir).unwrap();
}
