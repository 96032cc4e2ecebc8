//! Checks the hand-written declarations of src/lib.rs against include/llm/llm.h.
//!
//! - Functions: the set of `LLM_API` functions in the header equals the set
//!   of `pub fn`s in src/lib.rs, and each has the same parameter and return
//!   types (C types mapped to Rust: `const T *` -> `*const T`, `size_t` ->
//!   `usize`, ...).
//! - Callback typedefs: the same mapping for their parameters and result.
//! - Constants: every numeric `#define LLM_*` has a `pub const` of that value.
//! - Structs: the same fields in the same order with mapped types, and the
//!   same size, alignment and field offsets as a C compiler (`$CC`, default
//!   `cc`) gives for the header on this platform.
//!
//! - Symbols: every `llm_*` function libllm.so exports (`nm -D`) is declared.
//!
//! The header is `$LLM_HEADER`, default `../../../include/llm/llm.h` (the
//! repository's). A mismatch fails with the name of the declaration.
use std::collections::BTreeMap;
use std::mem::{align_of, size_of, MaybeUninit};
use std::path::PathBuf;
use std::process::Command;

use llm_sys::*;

fn header_path() -> PathBuf {
    match std::env::var_os("LLM_HEADER") {
        Some(p) => PathBuf::from(p),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../include/llm/llm.h"),
    }
}

fn read(path: &PathBuf) -> String {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {}", path.display(), e))
}

/// Removes /* */ and // comments.
fn strip_comments(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    loop {
        let block = rest.find("/*");
        let line = rest.find("//");
        match (block, line) {
            (None, None) => {
                out.push_str(rest);
                return out;
            }
            (Some(b), l) if l.map_or(true, |l| b < l) => {
                out.push_str(&rest[..b]);
                let end = rest[b..].find("*/").expect("unterminated comment") + b + 2;
                out.push(' ');
                rest = &rest[end..];
            }
            (_, Some(l)) => {
                out.push_str(&rest[..l]);
                rest = &rest[l..];
                rest = &rest[rest.find('\n').unwrap_or(rest.len())..];
            }
            _ => unreachable!(),
        }
    }
}

fn squash(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn no_space(s: &str) -> String {
    s.chars().filter(|c| !c.is_whitespace()).collect()
}

/// Splits on commas that are not inside (), <> or [].
fn split_top(s: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let mut depth = 0i32;
    let mut cur = String::new();
    for c in s.chars() {
        match c {
            '(' | '<' | '[' => depth += 1,
            ')' | '>' | ']' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(cur.trim().to_string());
                cur.clear();
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    if !cur.trim().is_empty() {
        parts.push(cur.trim().to_string());
    }
    parts
}

/// A C type (declarator name removed) as the Rust type it must be declared
/// with, e.g. "const char *const *" -> "*const *const c_char".
fn rust_type_of_c(c: &str) -> String {
    let c = c.replace('*', " * ");
    let words: Vec<&str> = c.split_whitespace().collect();
    let star = words.iter().position(|w| *w == "*").unwrap_or(words.len());
    let base_words: Vec<&str> = words[..star]
        .iter()
        .cloned()
        .filter(|w| *w != "const")
        .collect();
    let mut pointee_const = words[..star].contains(&"const");
    assert_eq!(base_words.len(), 1, "cannot map C type {:?}", c);
    let mut ty = match base_words[0] {
        "int32_t" => "i32",
        "uint32_t" => "u32",
        "int64_t" => "i64",
        "uint64_t" => "u64",
        "size_t" => "usize",
        "float" => "f32",
        "double" => "f64",
        "char" => "c_char",
        "void" if star == words.len() => "()",
        "void" => "c_void",
        other => other,
    }
    .to_string();
    let mut i = star;
    while i < words.len() {
        assert_eq!(words[i], "*", "cannot map C type {:?}", c);
        let this_const = words.get(i + 1) == Some(&"const");
        ty = format!("*{} {}", if pointee_const { "const" } else { "mut" }, ty);
        pointee_const = this_const;
        i += if this_const { 2 } else { 1 };
    }
    ty
}

/// "const llm_model *model" -> ("model", "*const llm_model");
/// "char name[128]" -> ("name", "[c_char; 128]").
fn c_decl(decl: &str) -> (String, String) {
    let decl = decl.trim();
    let (decl, array) = match decl.find('[') {
        Some(b) => (
            &decl[..b],
            Some(decl[b + 1..decl.len() - 1].trim().to_string()),
        ),
        None => (decl, None),
    };
    let name_start = decl
        .rfind(|c: char| !(c.is_alphanumeric() || c == '_'))
        .map_or(0, |i| i + 1);
    let name = decl[name_start..].to_string();
    let mut ty = rust_type_of_c(&decl[..name_start]);
    if let Some(n) = array {
        ty = format!("[{}; {}]", ty, n);
    }
    (name, ty)
}

/// (parameter types, return type) of a C function type or declaration.
type Signature = (Vec<String>, String);

fn c_params(params: &str) -> Vec<String> {
    let params = params.trim();
    if params == "void" || params.is_empty() {
        return Vec::new();
    }
    split_top(params).iter().map(|p| c_decl(p).1).collect()
}

struct Header {
    functions: BTreeMap<String, Signature>,
    callbacks: BTreeMap<String, Signature>,
    constants: BTreeMap<String, i64>,
    structs: BTreeMap<String, Vec<(String, String)>>,
}

fn parse_header(text: &str) -> Header {
    let text = strip_comments(text);
    let mut constants = BTreeMap::new();
    let mut code = String::new();
    let mut continued = false;
    for line in text.lines() {
        let t = line.trim();
        if continued || t.starts_with('#') {
            continued = t.ends_with('\\');
            let w: Vec<&str> = t.split_whitespace().collect();
            if w.len() == 3 && w[0] == "#define" && w[1].starts_with("LLM_") {
                if let Ok(v) = w[2].parse::<i64>() {
                    constants.insert(w[1].to_string(), v);
                }
            }
            continue;
        }
        code.push_str(line);
        code.push('\n');
    }

    let mut structs = BTreeMap::new();
    let mut rest = code.as_str();
    while let Some(at) = rest.find("typedef struct") {
        rest = &rest[at + "typedef struct".len()..];
        let open = rest.find('{');
        let semi = rest.find(';').unwrap();
        match open {
            Some(open) if open < semi => {
                let name = rest[..open].trim().to_string();
                let close = rest.find('}').unwrap();
                let fields = rest[open + 1..close]
                    .split(';')
                    .filter(|f| !f.trim().is_empty())
                    .map(|f| c_decl(&squash(f)))
                    .collect();
                structs.insert(name, fields);
                rest = &rest[close..];
            }
            _ => {} // an opaque forward declaration
        }
    }

    let mut functions = BTreeMap::new();
    let mut callbacks = BTreeMap::new();
    for stmt in code.split(';').map(squash) {
        let stmt = stmt.trim_start_matches("extern \"C\" {").trim();
        if let Some(decl) = stmt.strip_prefix("LLM_API ") {
            let open = decl.find('(').unwrap();
            let (name, ret) = c_decl(&decl[..open]);
            let params = c_params(&decl[open + 1..decl.rfind(')').unwrap()]);
            assert!(
                functions.insert(name.clone(), (params, ret)).is_none(),
                "{} twice",
                name
            );
        } else if stmt.starts_with("typedef") && stmt.contains("(*") {
            let open = stmt.find("(*").unwrap();
            let close = stmt[open..].find(')').unwrap() + open;
            let name = stmt[open + 2..close].trim().to_string();
            let ret = rust_type_of_c(&stmt["typedef".len()..open]);
            let params = c_params(&stmt[close + 2..stmt.rfind(')').unwrap()]);
            callbacks.insert(name, (params, ret));
        }
    }
    Header {
        functions,
        callbacks,
        constants,
        structs,
    }
}

struct Binding {
    functions: BTreeMap<String, Signature>,
    callbacks: BTreeMap<String, Signature>,
    constants: BTreeMap<String, i64>,
    structs: BTreeMap<String, Vec<(String, String)>>,
}

fn rust_params(params: &str) -> Vec<String> {
    split_top(params)
        .iter()
        .map(|p| no_space(&p[p.find(':').expect("param without type") + 1..]))
        .collect()
}

fn rust_ret(after_params: &str) -> String {
    match after_params.trim().strip_prefix("->") {
        Some(r) => no_space(r.trim_end_matches(|c| c == ';' || c == '>').trim()),
        None => "()".to_string(),
    }
}

fn parse_binding(text: &str) -> Binding {
    let text = strip_comments(text);
    let mut functions = BTreeMap::new();
    let mut callbacks = BTreeMap::new();
    let mut constants = BTreeMap::new();
    let mut structs = BTreeMap::new();
    for stmt in text.split(';').map(squash) {
        // A statement may start after the closing brace of a struct.
        let stmt = stmt.rsplit('}').next().unwrap().trim().to_string();
        let stmt = stmt.trim_start_matches("extern \"C\" {").trim();
        if let Some(decl) = stmt.strip_prefix("pub fn ") {
            let open = decl.find('(').unwrap();
            let close = decl.rfind(')').unwrap();
            let name = decl[..open].trim().to_string();
            let sig = (
                rust_params(&decl[open + 1..close]),
                rust_ret(&decl[close + 1..]),
            );
            assert!(
                functions.insert(name.clone(), sig).is_none(),
                "{} twice",
                name
            );
        } else if let Some(decl) = stmt.strip_prefix("pub type ") {
            if let Some(f) = decl.find("fn(") {
                let name = decl[..decl.find('=').unwrap()].trim().to_string();
                let close = decl.rfind(')').unwrap();
                callbacks.insert(
                    name,
                    (
                        rust_params(&decl[f + 3..close]),
                        rust_ret(&decl[close + 1..]),
                    ),
                );
            }
        } else if let Some(decl) = stmt.strip_prefix("pub const ") {
            let name = decl[..decl.find(':').unwrap()].trim().to_string();
            let value = decl[decl.find('=').unwrap() + 1..].trim();
            constants.insert(name, value.parse::<i64>().expect("constant value"));
        }
    }
    let mut rest = text.as_str();
    while let Some(at) = rest.find("pub struct ") {
        rest = &rest[at + "pub struct ".len()..];
        let open = rest.find('{').unwrap();
        let name = rest[..open].trim().to_string();
        let close = rest.find('}').unwrap();
        let fields: Vec<(String, String)> = split_top(&rest[open + 1..close])
            .iter()
            .map(|f| {
                let f = f.trim().trim_start_matches("pub ");
                let colon = f.find(':').unwrap();
                (f[..colon].trim().to_string(), no_space(&f[colon + 1..]))
            })
            .collect();
        structs.insert(name, fields);
        rest = &rest[close..];
    }
    // Opaque handle types have no fields of the header's.
    structs.retain(|_, fields| !fields.iter().any(|(n, _)| n == "_private"));
    Binding {
        functions,
        callbacks,
        constants,
        structs,
    }
}

fn normalized(map: &BTreeMap<String, Signature>) -> BTreeMap<String, Signature> {
    map.iter()
        .map(|(k, (p, r))| {
            (
                k.clone(),
                (p.iter().map(|t| no_space(t)).collect(), no_space(r)),
            )
        })
        .collect()
}

fn load() -> (Header, Binding) {
    let header = parse_header(&read(&header_path()));
    let binding = parse_binding(&read(
        &PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src/lib.rs"),
    ));
    (header, binding)
}

#[test]
fn every_header_function_is_declared_with_its_types() {
    let (header, binding) = load();
    assert!(
        header.functions.len() > 50,
        "parsed only {} functions",
        header.functions.len()
    );
    let want = normalized(&header.functions);
    let got = normalized(&binding.functions);
    let missing: Vec<_> = want.keys().filter(|k| !got.contains_key(*k)).collect();
    let extra: Vec<_> = got.keys().filter(|k| !want.contains_key(*k)).collect();
    assert!(
        missing.is_empty(),
        "functions of llm.h not declared in llm-sys: {:?}",
        missing
    );
    assert!(
        extra.is_empty(),
        "llm-sys declares functions llm.h lacks: {:?}",
        extra
    );
    for (name, sig) in &want {
        assert_eq!(
            &got[name], sig,
            "signature of {} (left: llm-sys, right: llm.h)",
            name
        );
    }
}

#[test]
fn callback_typedefs_match() {
    let (header, binding) = load();
    assert_eq!(header.callbacks.len(), 3, "{:?}", header.callbacks.keys());
    assert_eq!(
        normalized(&binding.callbacks),
        normalized(&header.callbacks)
    );
}

#[test]
fn every_constant_has_the_header_value() {
    let (header, binding) = load();
    assert!(
        header.constants.len() >= 30,
        "parsed {} constants",
        header.constants.len()
    );
    for (name, value) in &header.constants {
        assert_eq!(
            binding.constants.get(name),
            Some(value),
            "constant {}",
            name
        );
    }
    for name in binding.constants.keys() {
        assert!(
            header.constants.contains_key(name),
            "{} is not in llm.h",
            name
        );
    }
}

#[test]
fn struct_fields_match_in_order_and_type() {
    let (header, binding) = load();
    assert_eq!(header.structs.len(), 12, "{:?}", header.structs.keys());
    let norm = |fields: &Vec<(String, String)>| -> Vec<(String, String)> {
        fields
            .iter()
            .map(|(n, t)| (n.clone(), no_space(t)))
            .collect()
    };
    for (name, fields) in &header.structs {
        let got = binding
            .structs
            .get(name)
            .unwrap_or_else(|| panic!("struct {} missing", name));
        assert_eq!(
            norm(got),
            norm(fields),
            "fields of {} (left: llm-sys, right: llm.h)",
            name
        );
    }
    assert_eq!(
        binding.structs.len(),
        header.structs.len(),
        "{:?}",
        binding.structs.keys()
    );
}

/// (struct, size, align, [(field, offset)]) as Rust lays the struct out.
type Layout = (String, usize, usize, Vec<(String, usize)>);

macro_rules! rust_layout {
    ($t:ident { $($f:ident),* $(,)? }) => {{
        let value = MaybeUninit::<$t>::uninit();
        let base = value.as_ptr();
        #[allow(unused_unsafe)]
        let fields = vec![$((
            stringify!($f).to_string(),
            unsafe { std::ptr::addr_of!((*base).$f) as usize - base as usize },
        )),*];
        (stringify!($t).to_string(), size_of::<$t>(), align_of::<$t>(), fields)
    }};
}

fn rust_layouts() -> Vec<Layout> {
    vec![
        rust_layout!(llm_model_params {
            struct_size,
            vocab_only,
            n_threads,
            reserved0,
            progress,
            progress_user,
            kv_budget_bytes,
            deterministic,
            batch_tokens,
            device,
            device_index
        }),
        rust_layout!(llm_model_info {
            struct_size,
            vocab_only,
            n_params,
            n_ctx_train,
            n_vocab,
            n_layer,
            n_embd,
            n_head,
            n_head_kv,
            bos_token,
            eos_token,
            eot_token,
            pad_token,
            add_bos,
            architecture,
            name,
            device,
            device_index,
            mapped_weight_bytes,
            weight_copy_bytes
        }),
        rust_layout!(llm_kv_stats {
            struct_size,
            block_tokens,
            budget_bytes,
            block_bytes,
            block_overhead_bytes,
            blocks_total,
            blocks_allocated,
            blocks_used,
            blocks_shared,
            blocks_cached,
            prefix_hits,
            bytes_per_token_f16,
            bytes_per_token_f32,
            n_pools,
            local_window,
            local_budget_bytes,
            local_block_bytes,
            local_blocks_total,
            local_blocks_allocated,
            local_blocks_used,
            local_blocks_shared,
            local_blocks_cached,
            local_prefix_hits
        }),
        rust_layout!(llm_batch_stats {
            struct_size,
            reserved0,
            iterations,
            decode_iterations,
            decode_rows,
            prefill_chunks,
            tokens,
            max_sessions_in_pass,
            steps_completed,
            steps_failed
        }),
        rust_layout!(llm_chat_message { role, content }),
        rust_layout!(llm_chat_options {
            struct_size,
            add_generation_prompt,
            enable_thinking,
            date_string,
            bos_token,
            eos_token
        }),
        rust_layout!(llm_sampler_params {
            struct_size,
            temperature,
            top_k,
            top_p,
            min_p,
            repeat_penalty,
            presence_penalty,
            frequency_penalty,
            penalty_last_n
        }),
        rust_layout!(llm_sampler_ext {
            struct_size,
            reserved0
        }),
        rust_layout!(llm_session_params {
            struct_size,
            n_ctx,
            kv_type,
            n_threads,
            seed,
            sampler,
            sampler_ext
        }),
        rust_layout!(llm_session_stats {
            struct_size,
            reserved0,
            iterations,
            prefill_chunks,
            cached_tokens
        }),
        rust_layout!(llm_generate_params {
            struct_size,
            max_tokens,
            stop,
            n_stop,
            on_piece,
            user
        }),
        rust_layout!(llm_generate_result {
            struct_size,
            stop_reason,
            n_prompt_tokens,
            n_generated,
            prefill_ms,
            decode_ms
        }),
    ]
}

/// Compiles and runs a C program printing the layout of every header struct.
fn c_layouts(header: &Header) -> Vec<Layout> {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("llm_sys_layout");
    std::fs::create_dir_all(&dir).unwrap();
    let include = header_path()
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .to_path_buf();
    let mut src = String::from(
        "#include <stddef.h>\n#include <stdio.h>\n#include <llm/llm.h>\nint main(void) {\n",
    );
    for (name, fields) in &header.structs {
        src += &format!(
            "  printf(\"S {0} %zu %zu\\n\", sizeof({0}), (size_t)_Alignof({0}));\n",
            name
        );
        for (field, _) in fields {
            src += &format!(
                "  printf(\"F {0} %zu\\n\", offsetof({1}, {0}));\n",
                field, name
            );
        }
    }
    src += "  return 0;\n}\n";
    let c_file = dir.join("layout.c");
    let exe = dir.join("layout");
    std::fs::write(&c_file, src).unwrap();
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_string());
    let status = Command::new(&cc)
        .arg("-std=c11")
        .arg("-I")
        .arg(&include)
        .arg(&c_file)
        .arg("-o")
        .arg(&exe)
        .status()
        .unwrap_or_else(|e| panic!("cannot run the C compiler {:?}: {}", cc, e));
    assert!(status.success(), "compiling {} failed", c_file.display());
    let out = Command::new(&exe).output().unwrap();
    assert!(out.status.success());
    let mut layouts: Vec<Layout> = Vec::new();
    for line in String::from_utf8(out.stdout).unwrap().lines() {
        let w: Vec<&str> = line.split(' ').collect();
        match w[0] {
            "S" => layouts.push((
                w[1].to_string(),
                w[2].parse().unwrap(),
                w[3].parse().unwrap(),
                vec![],
            )),
            _ => layouts
                .last_mut()
                .unwrap()
                .3
                .push((w[1].to_string(), w[2].parse().unwrap())),
        }
    }
    layouts
}

#[test]
fn struct_layouts_match_the_c_compiler() {
    let (header, _) = load();
    let mut c = c_layouts(&header);
    let mut rust = rust_layouts();
    c.sort();
    rust.sort();
    assert_eq!(c.len(), header.structs.len());
    for (r, c) in rust.iter().zip(c.iter()) {
        assert_eq!(r, c, "layout of {} (left: Rust, right: C)", c.0);
    }
    assert_eq!(rust.len(), c.len());
}

#[test]
fn sizes_match_the_abi_table() {
    // docs/ABI.md, "Historical sizes" (LP64), 0.3 column.
    if size_of::<usize>() != 8 {
        return;
    }
    assert_eq!(size_of::<llm_model_params>(), 56);
    assert_eq!(size_of::<llm_model_info>(), 248);
    assert_eq!(size_of::<llm_kv_stats>(), 168);
    assert_eq!(size_of::<llm_batch_stats>(), 72);
    assert_eq!(size_of::<llm_sampler_params>(), 36);
    assert_eq!(size_of::<llm_sampler_ext>(), 8);
    assert_eq!(size_of::<llm_session_params>(), 72);
    assert_eq!(size_of::<llm_session_stats>(), 32);
    assert_eq!(size_of::<llm_generate_params>(), 40);
    assert_eq!(size_of::<llm_generate_result>(), 32);
    assert_eq!(size_of::<llm_chat_message>(), 16);
}

#[test]
fn parser_maps_c_types() {
    // The mapping itself, so that a parser bug cannot make both sides agree.
    assert_eq!(
        rust_type_of_c("const char *const *"),
        "*const *const c_char"
    );
    assert_eq!(rust_type_of_c("llm_model **"), "*mut *mut llm_model");
    assert_eq!(rust_type_of_c("const float **"), "*mut *const f32");
    assert_eq!(rust_type_of_c("void"), "()");
    assert_eq!(
        c_decl("char name[128]"),
        ("name".to_string(), "[c_char; 128]".to_string())
    );
}

#[test]
fn every_exported_symbol_is_declared() {
    let lib = env!("LLM_SYS_LIB_DIRS")
        .split(':')
        .filter(|d| !d.is_empty())
        .map(|d| PathBuf::from(d).join("libllm.so"))
        .find(|p| p.exists());
    let lib = match lib {
        Some(lib) => lib,
        None => {
            eprintln!(
                "SKIP: libllm.so was found on the linker's default path, not in a known directory"
            );
            return;
        }
    };
    let out = Command::new("nm")
        .args(["-D", "--defined-only"])
        .arg(&lib)
        .output()
        .expect("running nm (binutils)");
    assert!(out.status.success(), "nm -D {}", lib.display());
    let exported: Vec<String> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            // "ADDRESS T name@@VERSION": functions only.
            match w.as_slice() {
                [_, "T", name] => Some(name.split('@').next().unwrap().to_string()),
                _ => None,
            }
        })
        .filter(|n| n.starts_with("llm_"))
        .collect();
    let (_, binding) = load();
    assert!(
        exported.len() > 50,
        "{} exports {:?}",
        lib.display(),
        exported
    );
    for name in &exported {
        assert!(
            binding.functions.contains_key(name),
            "{} exports {} but llm-sys does not declare it",
            lib.display(),
            name
        );
    }
    for name in binding.functions.keys() {
        assert!(
            exported.contains(name),
            "llm-sys declares {} but {} does not export it",
            name,
            lib.display()
        );
    }
}
