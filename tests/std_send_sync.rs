//! Compile-time checks that the public std handles can cross threads, and
//! that the error types can be boxed as `dyn Error + Send + Sync`.

use std::cell::Cell;

use dinah_std::{
    CancellationToken, Executor, Scheduler, SchedulerError, Shared, SynchronizationError,
};

fn send<T: Send>() {}
fn sync<T: Sync>() {}
fn error<T: std::error::Error + Send + Sync + 'static>() {}

#[test]
fn handles_are_send_and_sync() {
    send::<Executor>();
    sync::<Executor>();
    send::<Scheduler>();
    sync::<Scheduler>();
    send::<CancellationToken>();
    sync::<CancellationToken>();
    send::<Shared<Vec<u8>>>();
    sync::<Shared<Vec<u8>>>();
    // The mutex makes a `Send`-only value shareable.
    send::<Shared<Cell<u8>>>();
    sync::<Shared<Cell<u8>>>();
}

#[test]
fn errors_are_boxable() {
    error::<SchedulerError>();
    error::<SynchronizationError>();
    let boxed: Box<dyn std::error::Error + Send + Sync> = Box::new(SchedulerError::ZeroWorkers);
    assert_eq!(
        boxed.to_string(),
        "parallel run needs at least one worker, got zero"
    );
}

#[test]
fn runtime_handles_cross_threads() {
    use dinah_std::transport::{TransportError, TransportHandle, TrySendError, Wakeup};
    use dinah_std::{
        ActionError, BuildError, CodecError, RemoteFuture, RuntimeClient, RuntimeError,
        ShutdownTimeout,
    };
    send::<RuntimeClient>();
    sync::<RuntimeClient>();
    send::<RemoteFuture<u64>>();
    send::<TransportHandle>();
    sync::<TransportHandle>();
    send::<Wakeup>();
    sync::<Wakeup>();
    error::<RuntimeError>();
    error::<BuildError>();
    error::<CodecError>();
    error::<ActionError>();
    error::<ShutdownTimeout>();
    error::<TransportError>();
    error::<TrySendError>();
}
