//! Python's symbols are resolved when Python loads the module; on macOS the linker must be
//! told so (`-undefined dynamic_lookup`), or a plain `cargo build --workspace` fails there.

fn main() {
    pyo3_build_config::add_extension_module_link_args();
}
