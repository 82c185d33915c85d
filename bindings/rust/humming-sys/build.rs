// Finds libhumming for the linker: HUMMING_LIB_DIR (the folder holding libhumming.so, e.g. a
// CMake build directory) first, then pkg-config (an installed Humming ships humming.pc).
// Crates that depend on this one read the folder as DEP_HUMMING_LIB_DIR.
use std::env;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=HUMMING_LIB_DIR");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    if let Ok(dir) = env::var("HUMMING_LIB_DIR") {
        println!("cargo:rustc-link-search=native={dir}");
        println!("cargo:rustc-link-lib=dylib=humming");
        println!("cargo:lib_dir={dir}");
        // This crate's own tests (struct sizes against the library) run without LD_LIBRARY_PATH.
        println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
        return;
    }
    let output = Command::new("pkg-config").args(["--libs", "humming"]).output();
    match output {
        Ok(out) if out.status.success() => {
            let flags = String::from_utf8_lossy(&out.stdout).into_owned();
            let mut linked = false;
            for flag in flags.split_whitespace() {
                if let Some(dir) = flag.strip_prefix("-L") {
                    println!("cargo:rustc-link-search=native={dir}");
                    println!("cargo:lib_dir={dir}");
                } else if let Some(lib) = flag.strip_prefix("-l") {
                    println!("cargo:rustc-link-lib=dylib={lib}");
                    linked = linked || lib == "humming";
                }
            }
            if !linked {
                println!("cargo:rustc-link-lib=dylib=humming");
            }
        }
        _ => panic!(
            "libhumming was not found: set HUMMING_LIB_DIR to the folder that holds libhumming.so \
             (a CMake build directory works), or install Humming with its pkg-config file \
             (humming.pc) on PKG_CONFIG_PATH"
        ),
    }
}
