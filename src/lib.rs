//! grantguard enforces a *repository grant* on a git checkout in which an
//! automated agent works: which paths its commits may touch, how many local
//! commits it must and may make, and that it may not publish.
//!
//! The layers, each a module:
//!
//! - [`grant`]: the `repository_grant` v1 contract, its canonical id and the
//!   compiled path matcher.
//! - [`repo`]: read-only access to the repository through gix, hardened so
//!   the checkout's config can never make a program run.
//! - [`baseline`]: the record `arm` writes outside the checkout.
//! - [`state`]: the state directory and the arm/disarm life cycle.
//! - [`acceptance`]: the rules `verify` applies, and the verdict.
//! - [`hooks`]: `pre-commit`, `pre-push` and `reference-transaction`, and
//!   their installation.
//! - [`status`]: what the agent has used of its grant.
//! - [`run`]: `grantguard run`, the canonical repository transaction around
//!   an agent's command, with its [`journal`] (durable started/terminal
//!   records, reconciliation) and external [`metrics`].
//! - [`result`]: the typed [`result::ToolResult`] and failure taxonomy every
//!   command reports.
//! - [`contract`]: task specs and contracts, the tool catalog, the role
//!   registry and the admission gate (seed 000).
//! - [`document`], [`digest`], [`fsutil`]: strict input parsing, digests and
//!   durable writes shared by the rest.
//! - [`allocator`], [`memcopy`], [`memcompare`]: the allocator, the
//!   `memcpy` and the `memcmp` of the static musl build (`install.sh`),
//!   which starts fastest as a hook; [`prefetch`], the hint a walk
//!   through a file's chained records gives the CPU.
//!
//! The binary (`src/main.rs`) only parses arguments, calls these modules and
//! maps results to exit codes.

#![deny(missing_docs)]

pub mod acceptance;
pub mod allocator;
pub mod baseline;
pub mod contract;
pub mod deadline;
pub mod digest;
pub mod document;
pub mod fsutil;
pub mod grant;
pub mod hooks;
pub mod journal;
pub mod memcompare;
pub mod memcopy;
pub mod metrics;
pub mod next_step;
pub mod peers;
pub mod prefetch;
pub mod publication;
pub mod repo;
pub mod result;
pub mod run;
pub mod state;
pub mod status;
pub mod workspace;

#[cfg(test)]
mod test_git;
