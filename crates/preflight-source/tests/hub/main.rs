//! Hub sources against the fixture Hub on loopback: what is read, how often, and what every
//! failure turns into. One test binary, a module per area.

mod cache;
mod faults;
mod hostile;
mod meta;
mod staging;
mod support;
