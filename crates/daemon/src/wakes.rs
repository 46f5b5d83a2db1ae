//! Tasks that run both halves of hyper connections, with the wakes they give themselves
//! kept inside them.
//!
//! hyper passes a request's body, a response head and each body frame between the halves
//! of a connection through channels. A client connection's task (crate::listen::server)
//! runs the server half and, for the tap, the upstream exchange too
//! ([`crate::http1::exchange`]); a scrape's task runs its exchange's connection and reads
//! its response. Each hand-off wakes the waker of the task that is running it. tokio's
//! multi-threaded scheduler reads a wake that comes while a task runs as a yield: the task
//! goes to the back of the run queue and a parked worker thread is woken to steal it, a
//! futex wake and two context switches per hand-off, on the machine that also runs the
//! engine and its clients (docs/benchmarks.md#wakes-kept-in-the-task-2026-12-05-night).
//!
//! [`InTask`] polls its future with a waker of its own. A wake that comes while the future
//! is being polled (from the task itself, or from another thread at that instant) is
//! noted, and the future is polled again before the poll returns; a wake between polls
//! wakes the task as before. A future that keeps waking itself is handed back to the
//! runtime after [`AGAIN`] polls, so a yield still yields.
//!
//! A poll can also put work off until it returns ([`after_poll`]): hyper writes what a
//! poll made ready before the poll returns, so the tap's measurement of a frame, put off,
//! runs after the frame went to the client instead of before
//! (docs/request-path.md#invisible-to-clients).

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::task::{Context, Poll, Wake, Waker};

use futures_util::task::AtomicWaker;

/// How many times one poll of the task polls its future again after it woke itself.
pub const AGAIN: usize = 8;

/// The future is not being polled: a wake goes to the task.
const IDLE: u8 = 0;
/// The future is being polled; nothing has woken it since the poll began.
const POLLING: u8 = 1;
/// A wake came during the poll: the future is polled again.
const WOKEN: u8 = 2;

/// `future`, its wakes during its own polls absorbed ([module docs](self)).
pub fn in_task<F: Future>(future: F) -> InTask<F> {
    let shared = Arc::new(Shared { state: AtomicU8::new(IDLE), task: AtomicWaker::new() });
    InTask { future: Box::pin(future), waker: Waker::from(shared.clone()), shared }
}

/// See [`in_task`].
pub struct InTask<F> {
    future: Pin<Box<F>>,
    shared: Arc<Shared>,
    /// `shared` as a waker, made once: the future's resources see the same waker at every
    /// poll and keep their registration.
    waker: Waker,
}

struct Shared {
    state: AtomicU8,
    /// The task's own waker, as of its last poll.
    task: AtomicWaker,
}

impl Wake for Shared {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        match self.state.compare_exchange(POLLING, WOKEN, Ordering::AcqRel, Ordering::Acquire) {
            // The poll in progress polls again; one already noted needs nothing more.
            Ok(_) | Err(WOKEN) => {}
            Err(_) => self.task.wake(),
        }
    }
}

impl<F: Future> Future for InTask<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.get_mut();
        this.shared.task.register(cx.waker());
        let mut own = Context::from_waker(&this.waker);
        for _ in 0..AGAIN {
            this.shared.state.store(POLLING, Ordering::Release);
            let polled = {
                let _due = Puts::off();
                this.future.as_mut().poll(&mut own)
            };
            // A wake after this swap sees IDLE and wakes the task; one before it is seen here.
            let woken = this.shared.state.swap(IDLE, Ordering::AcqRel) == WOKEN;
            if polled.is_ready() || !woken {
                return polled;
            }
        }
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

/// Work a poll puts off until it returns ([`after_poll`]).
pub trait AfterPoll: Send + Sync {
    fn after_poll(&self);
}

thread_local! {
    /// How many [`InTask`] polls are in progress on this thread (one, unless a future polls
    /// another task's future inside its own).
    static POLLS: Cell<usize> = const { Cell::new(0) };
    /// What they put off, in the order it was put off.
    static DUE: RefCell<Vec<Arc<dyn AfterPoll>>> = const { RefCell::new(Vec::new()) };
}

/// Whether an [`InTask`] poll is in progress on this thread, so that [`after_poll`] puts
/// work off rather than running it at once.
pub fn polling() -> bool {
    POLLS.with(Cell::get) > 0
}

/// Runs `work.after_poll()` when the [`InTask`] poll in progress on this thread returns,
/// after the writes it made; at once when none is.
pub fn after_poll(work: Arc<dyn AfterPoll>) {
    if polling() {
        DUE.with(|d| d.borrow_mut().push(work));
    } else {
        work.after_poll();
    }
}

/// One [`InTask`] poll's scope: what is put off during it runs when it ends, unless it ends
/// by a panic (then the work is dropped, and its owners see to what it held).
struct Puts;

impl Puts {
    fn off() -> Puts {
        POLLS.with(|p| p.set(p.get() + 1));
        Puts
    }
}

impl Drop for Puts {
    fn drop(&mut self) {
        let outermost = POLLS.with(|p| {
            p.set(p.get() - 1);
            p.get() == 0
        });
        if !outermost {
            return;
        }
        // Taken out before running, so that the work may put off more (it runs at once
        // now); the list's buffer goes back for the next poll.
        let mut due = DUE.with(|d| std::mem::take(&mut *d.borrow_mut()));
        if !std::thread::panicking() {
            for work in due.drain(..) {
                work.after_poll();
            }
        }
        due.clear();
        DUE.with(|d| {
            let mut d = d.borrow_mut();
            if d.is_empty() {
                *d = due;
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use std::sync::atomic::{AtomicBool, AtomicUsize};

    /// A future that wakes itself `left` more times, then is ready; counts its polls.
    struct Wakes {
        left: usize,
        polls: Arc<AtomicUsize>,
    }

    impl Future for Wakes {
        type Output = ();

        fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
            self.polls.fetch_add(1, Ordering::Relaxed);
            if self.left == 0 {
                return Poll::Ready(());
            }
            self.left -= 1;
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }

    /// Counts the wakes the task gets.
    struct Counter(AtomicUsize);

    impl Wake for Counter {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn task() -> (Arc<Counter>, Waker) {
        let c = Arc::new(Counter(AtomicUsize::new(0)));
        (c.clone(), Waker::from(c))
    }

    #[test]
    fn a_wake_during_its_poll_polls_again_without_waking_the_task() {
        let polls = Arc::new(AtomicUsize::new(0));
        let mut f = std::pin::pin!(in_task(Wakes { left: 3, polls: polls.clone() }));
        let (woke, waker) = task();
        assert!(f.as_mut().poll(&mut Context::from_waker(&waker)).is_ready());
        assert_eq!(polls.load(Ordering::Relaxed), 4);
        assert_eq!(woke.0.load(Ordering::Relaxed), 0, "the task was not woken");
    }

    #[test]
    fn a_future_that_keeps_waking_itself_yields_to_the_runtime() {
        let polls = Arc::new(AtomicUsize::new(0));
        let mut f = std::pin::pin!(in_task(Wakes { left: usize::MAX, polls: polls.clone() }));
        let (woke, waker) = task();
        assert!(f.as_mut().poll(&mut Context::from_waker(&waker)).is_pending());
        assert_eq!(polls.load(Ordering::Relaxed), AGAIN);
        assert_eq!(woke.0.load(Ordering::Relaxed), 1, "handed back to the runtime once");
    }

    #[tokio::test]
    async fn a_wake_between_polls_wakes_the_task() {
        let (tx, rx) = tokio::sync::oneshot::channel::<u32>();
        let mut f = std::pin::pin!(in_task(rx));
        let (woke, waker) = task();
        assert!(f.as_mut().poll(&mut Context::from_waker(&waker)).is_pending());
        assert_eq!(woke.0.load(Ordering::Relaxed), 0);
        std::thread::spawn(move || tx.send(7)).join().expect("sender thread").expect("receiver alive");
        assert_eq!(woke.0.load(Ordering::Relaxed), 1, "the send woke the task");
        assert!(matches!(f.as_mut().poll(&mut Context::from_waker(&waker)), Poll::Ready(Ok(7))));
    }

    /// Records whether each wake came while the future was being polled.
    #[derive(Default)]
    struct Probe {
        polling: AtomicBool,
        during: AtomicUsize,
        between: AtomicUsize,
    }

    impl Wake for Probe {
        fn wake(self: Arc<Self>) {
            let n = if self.polling.load(Ordering::SeqCst) { &self.during } else { &self.between };
            n.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// Polls `f` to its end as a runtime would, on this thread; returns its output and the
    /// wakes it got while being polled.
    fn run<F: Future>(f: F) -> (F::Output, usize) {
        let probe = Arc::new(Probe::default());
        let waker = Waker::from(probe.clone());
        let mut f = std::pin::pin!(f);
        let mut woken = 0;
        loop {
            probe.polling.store(true, Ordering::SeqCst);
            let polled = f.as_mut().poll(&mut Context::from_waker(&waker));
            probe.polling.store(false, Ordering::SeqCst);
            if let Poll::Ready(out) = polled {
                return (out, probe.during.load(Ordering::SeqCst));
            }
            let now = probe.during.load(Ordering::SeqCst) + probe.between.load(Ordering::SeqCst);
            assert!(now > woken, "pending and never woken: nothing else could wake it");
            woken = now;
        }
    }

    /// A whole HTTP/1.1 exchange, hyper's server and client connections and the client's
    /// request, in one future, as a tap's client connection polls its upstream exchange.
    async fn exchange() -> Bytes {
        use http_body_util::{BodyExt, Empty, Full};
        use hyper_util::rt::TokioIo;
        let (client_io, server_io) = tokio::io::duplex(64 * 1024);
        let answer = hyper::service::service_fn(|_req| async {
            Ok::<_, std::convert::Infallible>(hyper::Response::new(Full::new(Bytes::from_static(b"hello"))))
        });
        let server = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(server_io), answer);
        let (mut tx, conn) =
            hyper::client::conn::http1::handshake(TokioIo::new(client_io)).await.expect("client handshake");
        let client = async move {
            let resp = tx.send_request(hyper::Request::new(Empty::<Bytes>::new())).await.expect("response");
            resp.into_body().collect().await.expect("body").to_bytes()
        };
        let (served, ended, body) = tokio::join!(server, conn, client);
        served.expect("server connection");
        ended.expect("client connection");
        body
    }

    #[test]
    fn hypers_hand_offs_wake_a_bare_task_while_it_runs_and_not_one_in_task() {
        let (body, bare) = run(exchange());
        assert_eq!(&body[..], b"hello");
        assert!(bare > 0, "hyper's channels woke the running task {bare} times: what in_task is for");
        let (body, kept) = run(in_task(exchange()));
        assert_eq!(&body[..], b"hello");
        assert_eq!(kept, 0, "in_task let {kept} of the {bare} wakes reach the runtime");
    }

    /// Notes each run of its work, and whether it came during a poll.
    #[derive(Default)]
    struct Note {
        runs: AtomicUsize,
        during: AtomicUsize,
    }

    impl AfterPoll for Note {
        fn after_poll(&self) {
            self.runs.fetch_add(1, Ordering::SeqCst);
            if polling() {
                self.during.fetch_add(1, Ordering::SeqCst);
            }
        }
    }

    /// Puts `note` off twice at its first poll and is ready at its second with the runs
    /// the note had by then.
    struct PutsOff {
        note: Arc<Note>,
        polls: usize,
    }

    impl Future for PutsOff {
        type Output = usize;

        fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<usize> {
            self.polls += 1;
            if self.polls == 1 {
                after_poll(self.note.clone());
                after_poll(self.note.clone());
                assert_eq!(self.note.runs.load(Ordering::SeqCst), 0, "put off, not run during the poll");
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            Poll::Ready(self.note.runs.load(Ordering::SeqCst))
        }
    }

    #[test]
    fn work_put_off_runs_when_the_poll_returns_and_at_once_outside_one() {
        let note = Arc::new(Note::default());
        let mut f = std::pin::pin!(in_task(PutsOff { note: note.clone(), polls: 0 }));
        let (_, waker) = task();
        // The first poll wakes itself, so in_task polls again at once: the work put off by
        // the first has run before the second.
        assert!(matches!(f.as_mut().poll(&mut Context::from_waker(&waker)), Poll::Ready(2)));
        assert_eq!(note.runs.load(Ordering::SeqCst), 2);
        assert_eq!(note.during.load(Ordering::SeqCst), 0, "it ran after the poll, outside it");
        assert!(!polling());
        after_poll(note.clone());
        assert_eq!(note.runs.load(Ordering::SeqCst), 3, "outside a poll it runs at once");
    }

    /// Puts `note` off, then panics.
    struct Panics(Arc<Note>);

    impl Future for Panics {
        type Output = ();

        fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<()> {
            after_poll(self.0.clone());
            panic!("a poll that fails");
        }
    }

    #[test]
    fn a_poll_that_panics_drops_its_work_and_leaves_no_scope_behind() {
        let note = Arc::new(Note::default());
        let (_, waker) = task();
        let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let mut f = std::pin::pin!(in_task(Panics(note.clone())));
            let _ = f.as_mut().poll(&mut Context::from_waker(&waker));
        }));
        assert!(panicked.is_err());
        assert_eq!(note.runs.load(Ordering::SeqCst), 0, "not run while unwinding");
        assert_eq!(Arc::strong_count(&note), 1, "dropped");
        assert!(!polling(), "no poll is left in progress on the thread");
        after_poll(note.clone());
        assert_eq!(note.runs.load(Ordering::SeqCst), 1);
    }
}
