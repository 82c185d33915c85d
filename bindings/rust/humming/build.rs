// Tests and examples of this crate find libhumming at run time through an rpath to the folder
// humming-sys linked against (DEP_HUMMING_LIB_DIR), so they run without LD_LIBRARY_PATH.
fn main() {
    println!("cargo:rerun-if-env-changed=DEP_HUMMING_LIB_DIR");
    if let Ok(dir) = std::env::var("DEP_HUMMING_LIB_DIR") {
        println!("cargo:rustc-link-arg-tests=-Wl,-rpath,{dir}");
        println!("cargo:rustc-link-arg-examples=-Wl,-rpath,{dir}");
    }
}
