//! The format readers' tests: one binary, a module per area. Real headers from the bundled
//! fixtures (`fixtures`), hostile input (`hostile`) and properties over generated headers
//! (`properties`), built byte by byte by the `writers`.

mod fixtures;
mod hostile;
mod properties;
mod writers;
