//! Finds libllm for the linker, without downloading or generating anything.
//!
//! 1. `LLM_LIB_DIR`: a directory holding `libllm.so` (a CMake build directory
//!    such as `build/`, or an install's `lib/`).
//! 2. Otherwise `pkg-config --libs-only-L llm` (an installed libllm, or one
//!    found through `PKG_CONFIG_PATH`).
//! 3. Otherwise the linker's default search path.
//!
//! At run time the dynamic loader must find `libllm.so.0` too
//! (`LD_LIBRARY_PATH`, or an install in a system directory).
use std::env;
use std::process::Command;

fn main() {
    let mut dirs: Vec<String> = Vec::new();
    println!("cargo:rerun-if-env-changed=LLM_LIB_DIR");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    println!("cargo:rerun-if-changed=build.rs");

    if let Some(dir) = env::var_os("LLM_LIB_DIR") {
        let dir = dir.to_string_lossy().into_owned();
        println!("cargo:rustc-link-search=native={}", dir);
        println!("cargo:lib_dir={}", dir);
        dirs.push(dir);
    } else {
        match Command::new("pkg-config")
            .args(["--libs-only-L", "llm"])
            .output()
        {
            Ok(out) if out.status.success() => {
                let flags = String::from_utf8_lossy(&out.stdout).into_owned();
                for flag in flags.split_whitespace() {
                    if let Some(dir) = flag.strip_prefix("-L") {
                        println!("cargo:rustc-link-search=native={}", dir);
                        println!("cargo:lib_dir={}", dir);
                        dirs.push(dir.to_string());
                    }
                }
            }
            _ => println!(
                "cargo:warning=libllm: neither LLM_LIB_DIR nor `pkg-config llm` is set up; \
                 relying on the linker's default search path"
            ),
        }
    }
    println!("cargo:rustc-link-lib=dylib=llm");
    // For tests/header.rs: where the linked libllm.so is (its exported symbols).
    println!("cargo:rustc-env=LLM_SYS_LIB_DIRS={}", dirs.join(":"));
}
