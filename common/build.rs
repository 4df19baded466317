fn main() {
    // Fresh machines have no protoc; use the one shipped in protoc-bin-vendored.
    let protoc = protoc_bin_vendored::protoc_bin_path().expect("protoc-bin-vendored has a protoc");
    // SAFETY: build scripts are single-threaded.
    unsafe { std::env::set_var("PROTOC", protoc) };
    println!("cargo:rerun-if-changed=../proto/shoal.proto");
    // sqlx::migrate! embeds sql/ at compile time.
    println!("cargo:rerun-if-changed=../sql");
    tonic_prost_build::configure()
        .compile_protos(&["../proto/shoal.proto"], &["../proto"])
        .expect("compile proto/shoal.proto");
}
