//! Compile-fail checks: misuse the type system rules out.
//!
//! Each `compile_fail` block below is paired with a block that compiles: the
//! same code with only the offending line fixed, so the failure is known to
//! come from that line and not from an unrelated mistake (doctests deny
//! warnings, which would otherwise make any sloppy block "fail"). The error
//! codes are checked on nightly toolchains.
//!
//! # A `TaskId` is not a `WorkerId`
//!
//! ```compile_fail,E0308
//! use dinah_core::{IdError, TaskId, WorkerId};
//!
//! fn assign(worker: WorkerId) -> u64 {
//!     worker.get()
//! }
//! let task = TaskId::new(1)?;
//! assign(task); // a task ID where a worker ID is expected
//! # Ok::<(), IdError>(())
//! ```
//!
//! ```
//! use dinah_core::{IdError, TaskId, WorkerId};
//!
//! fn assign(worker: WorkerId) -> u64 {
//!     worker.get()
//! }
//! let task = TaskId::new(1)?;
//! assign(WorkerId::new(task.get())?); // an explicit, visible conversion
//! # Ok::<(), IdError>(())
//! ```
//!
//! # A task state is not a runtime state
//!
//! ```compile_fail,E0308
//! use dinah_core::{RuntimeState, TaskState};
//!
//! let _ = TaskState::Pending.can_transition_to(RuntimeState::Running);
//! ```
//!
//! ```
//! use dinah_core::TaskState;
//!
//! let _ = TaskState::Pending.can_transition_to(TaskState::Running);
//! ```
//!
//! # A rejected transition cannot be silently ignored
//!
//! ```compile_fail
//! use dinah_core::TaskState;
//!
//! let mut state = TaskState::Completed;
//! state.transition(TaskState::Running); // unused `Result`: denied
//! ```
//!
//! ```
//! use dinah_core::TaskState;
//!
//! let mut state = TaskState::Completed;
//! assert!(state.transition(TaskState::Running).is_err());
//! ```
//!
//! # An atomic task state only moves along the table
//!
//! There is no `store`: a terminal task cannot be overwritten.
//!
//! ```compile_fail,E0599
//! use dinah_core::{AtomicTaskState, TaskState};
//!
//! let state = AtomicTaskState::new(TaskState::Completed);
//! state.store(TaskState::Pending);
//! ```
//!
//! ```
//! use dinah_core::{AtomicTaskState, TaskState};
//!
//! let state = AtomicTaskState::new(TaskState::Completed);
//! assert!(state.transition(TaskState::Completed, TaskState::Pending).is_err());
//! ```
//!
//! # A `CancellationToken` cannot outlive its `CancelFlag`
//!
//! ```compile_fail,E0597
//! use dinah_core::{CancelFlag, CancellationToken};
//!
//! let token: CancellationToken<'_> = {
//!     let flag = CancelFlag::new(); // dropped at the end of this block
//!     flag.token()
//! };
//! assert!(!token.is_cancellation_requested());
//! ```
//!
//! ```
//! use dinah_core::{CancelFlag, CancellationToken};
//!
//! let flag = CancelFlag::new(); // outlives the token
//! let token: CancellationToken<'_> = {
//!     flag.token()
//! };
//! assert!(!token.is_cancellation_requested());
//! ```
//!
//! # A token borrowed from a local flag cannot go to a detached thread
//!
//! ```compile_fail,E0597
//! use dinah_core::CancelFlag;
//!
//! let flag = CancelFlag::new();
//! let token = flag.token();
//! let worker = std::thread::spawn(move || token.is_cancellation_requested());
//! assert!(!worker.join().expect("worker panicked"));
//! ```
//!
//! ```
//! use dinah_core::CancelFlag;
//!
//! let flag = CancelFlag::new();
//! let token = flag.token();
//! std::thread::scope(|scope| {
//!     let worker = scope.spawn(move || token.is_cancellation_requested());
//!     assert!(!worker.join().expect("worker panicked"));
//! });
//! ```
//!
//! # Metrics counters change only through `record_*`
//!
//! ```compile_fail,E0616
//! use dinah_core::RuntimeMetrics;
//!
//! let metrics = RuntimeMetrics::new();
//! let _ = metrics.submitted;
//! ```
//!
//! ```
//! use dinah_core::RuntimeMetrics;
//!
//! let metrics = RuntimeMetrics::new();
//! metrics.record_submitted();
//! assert_eq!(metrics.snapshot().submitted, 1);
//! ```
//!
//! # A request sequencer hands out request IDs, not bare integers
//!
//! ```compile_fail,E0308
//! use dinah_core::{RequestSequencer, WorldSize};
//!
//! # fn main() -> Result<(), Box<dyn core::error::Error>> {
//! let world = WorldSize::new(2)?;
//! let ids = RequestSequencer::with_storage([0_u64; 2], world)?;
//! let _next: u64 = ids.peek(world.rank(1)?)?;
//! # Ok(())
//! # }
//! ```
//!
//! ```
//! use dinah_core::{RequestId, RequestSequencer, WorldSize};
//!
//! # fn main() -> Result<(), Box<dyn core::error::Error>> {
//! let world = WorldSize::new(2)?;
//! let ids = RequestSequencer::with_storage([0_u64; 2], world)?;
//! let _next: RequestId = ids.peek(world.rank(1)?)?;
//! # Ok(())
//! # }
//! ```
