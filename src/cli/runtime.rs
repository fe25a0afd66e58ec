//! The binary's async runtime: built by hand, and shut down with a deadline once the command is done.
//!
//! What it guarantees: [`block_on`] returns at most `grace` after its future completed, whatever tasks are
//! still running then. Dropping a tokio runtime instead waits for every worker thread, so one task that spins
//! without yielding keeps the process alive forever; that happened once in 530 runs, in sqlx 0.8's pool
//! maintenance task after `quarantine` had printed its result and released its claim.
//! See: <https://github.com/launchbadge/sqlx/issues/3645>
//!
//! What it does not do: it cannot stop a stuck task. Its thread keeps running until the process exits, which
//! returning from `main` does at once. It is a last resort: commands close their pools themselves
//! ([`crate::ops::context::Context::close`]) and the pools run no maintenance task (see `db::connect`).

use std::future::Future;
use std::time::{Duration, Instant};

/// How long the binary waits for the runtime's remaining tasks after a command, before it exits anyway.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// How the runtime shut down after [`block_on`]'s future completed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shutdown {
    /// Every task stopped within the grace period.
    Clean,
    /// Some task was still running when the grace period ended; it was left behind.
    TimedOut,
}

/// Runs `future` to completion on a new multi-threaded runtime, then shuts the runtime down, waiting at most
/// `grace` for the tasks still running.
///
/// A panic of `future` is caught and returned as `Err` with its message, after the same bounded shutdown: left
/// to unwind out of here, it dropped the runtime, which waits for every worker without a limit, and the process
/// ended with Rust's exit code 101 and no `--json` document instead of "could not decide" (2).
///
/// # Errors
/// The I/O error of building the runtime (threads or the I/O driver could not be created).
pub fn block_on<F: Future>(
    future: F,
    grace: Duration,
) -> std::io::Result<(std::result::Result<F::Output, String>, Shutdown)> {
    use futures::FutureExt as _;
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let out = rt
        .block_on(std::panic::AssertUnwindSafe(future).catch_unwind())
        .map_err(|payload| {
            payload
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic without a message".to_owned())
        });
    let started = Instant::now();
    rt.shutdown_timeout(grace);
    let how = if started.elapsed() >= grace {
        Shutdown::TimedOut
    } else {
        Shutdown::Clean
    };
    Ok((out, how))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};

    /// `block_on` (300 ms of grace) of a future that first starts a task that never yields (like sqlx#3645's
    /// reaper: a loop with no await in it), then returns `then()`; on another thread, which must come back within 30
    /// s. The task stops once `block_on` has returned.
    fn beside_a_task_that_never_yields<T: Send + 'static>(
        started: &'static AtomicBool,
        stop: &'static AtomicBool,
        then: fn() -> T,
    ) -> (std::result::Result<T, String>, Shutdown) {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let r = block_on(
                async move {
                    tokio::spawn(async move {
                        started.store(true, Ordering::SeqCst);
                        while !stop.load(Ordering::SeqCst) {
                            std::hint::spin_loop();
                        }
                    });
                    while !started.load(Ordering::SeqCst) {
                        tokio::time::sleep(Duration::from_millis(5)).await;
                    }
                    then()
                },
                Duration::from_millis(300),
            );
            let _ = tx.send(r.map_err(|e| e.to_string()));
        });
        let got = rx.recv_timeout(Duration::from_secs(30));
        stop.store(true, Ordering::SeqCst);
        got.expect("block_on must return although a task never yields").unwrap()
    }

    /// See: issue 16 point 6 — a worker spinning in sqlx's `pop_idle` kept the process alive for minutes.
    #[test]
    fn r16_a_task_that_never_yields_cannot_keep_the_runtime_alive() {
        static STARTED: AtomicBool = AtomicBool::new(false);
        static STOP: AtomicBool = AtomicBool::new(false);
        let (value, how) = beside_a_task_that_never_yields(&STARTED, &STOP, || 7);
        assert_eq!(value, Ok(7));
        assert_eq!(how, Shutdown::TimedOut);

        // Nothing left running: a clean shutdown, well within the grace period.
        let (value, how) = block_on(async { 8 }, Duration::from_secs(10)).unwrap();
        assert_eq!((value, how), (Ok(8), Shutdown::Clean));
    }

    /// See: the review of 2026-12-07. A command's panic unwound out of `block_on`, past the bounded shutdown: the
    /// runtime's drop then waited for every worker (one that never yields: forever) and the process exited 101.
    #[test]
    fn a_panic_is_returned_as_its_message_after_the_bounded_shutdown() {
        static STARTED: AtomicBool = AtomicBool::new(false);
        static STOP: AtomicBool = AtomicBool::new(false);
        let (value, how) = beside_a_task_that_never_yields(&STARTED, &STOP, || -> u8 {
            let n: Option<u8> = std::hint::black_box(None);
            n.expect("a command's bug")
        });
        assert_eq!(value, Err("a command's bug".to_owned()));
        assert_eq!(how, Shutdown::TimedOut);
    }
}
