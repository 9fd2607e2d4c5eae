//! grantguard enforces a *repository grant* on a git checkout in which an
//! automated agent works: which paths its commits may touch, how many local
//! commits it must and may make, and that it may not publish.
//!
//! The layers, each a module:
//!
//! - [`grant`]: the `repository_grant` v1 contract, its canonical id and the
//!   compiled path matcher.
//! - [`result`]: the typed [`result::ToolResult`] and failure taxonomy every
//!   command reports.
//! - [`document`]: strict JSON/TOML reading shared by every input format.
//! - [`contract`]: task specs and contracts, the tool catalog, the role
//!   registry and the admission gate (seed 000).
//!
//! The binary (`src/main.rs`) only parses arguments, calls these modules and
//! maps results to exit codes.

#![deny(missing_docs)]

pub mod contract;
pub mod digest;
pub mod document;
pub mod grant;
pub mod result;
