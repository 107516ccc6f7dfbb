//! The plan service, driven in process (no port) against the fixture Hub. One test binary,
//! a module per area.

mod bounds;
mod cache;
mod facts;
mod hostile;
mod order;
mod routes;
mod shared;
mod support;
