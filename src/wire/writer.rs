//! A stream's writing end: whole messages, in order, from any task or reader thread.
//!
//! Messages queue for the stream's writer task, which writes them one after another. A
//! message sent while nothing is queued is written at once by its sender instead, when
//! the stream takes it without waiting: the hop to the writer task (a wake-up, a task
//! poll, the queue's bookkeeping) was a large part of the code a proxied call runs
//! (BENCHMARKS.md §1). What the stream does not take at once is queued first, before
//! anything sent after it, so the order stays the order of sending.

use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::task::{Context, Poll, Waker};

use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot};

use super::SPARE;

/// Frames waiting for the writer: senders wait beyond this, so memory stays bounded even
/// when the peer stops reading.
const WRITE_QUEUE: usize = 64;

/// One frame for the writer task: `bytes[from..]`, its newline included, and where to
/// report how writing it went.
pub(super) type Frame = (Vec<u8>, usize, Option<oneshot::Sender<io::Result<()>>>);

/// Starts the writer task of `out`: the queue's sending end and the stream's [`Outlet`].
/// The task ends, and shuts `out` down (the peer sees EOF), once every sender is gone.
pub(super) fn start<Out>(out: Out) -> (mpsc::Sender<Frame>, Arc<dyn Outlet>)
where
    Out: AsyncWrite + Send + Unpin + 'static,
{
    let (writer, queue) = mpsc::channel(WRITE_QUEUE);
    let gate = Arc::new(Gate(Mutex::new(Open {
        out: Some(out),
        queued: 0,
    })));
    tokio::spawn(write_frames(gate.clone(), queue));
    (writer, gate)
}

/// What senders need of a stream's writing end, whatever the stream.
pub(super) trait Outlet: Send + Sync {
    /// Writes `frame[from..]` (its newline included) at once if nothing is queued and the
    /// stream is open; what the stream does not take now is queued on `queue`, first.
    /// Gives the frame back, untouched, when none of it could be written.
    fn write_now(
        &self,
        frame: Vec<u8>,
        from: usize,
        queue: &mpsc::Sender<Frame>,
    ) -> Result<(), Vec<u8>>;

    /// One more frame is about to be queued: until the writer task wrote it, nothing is
    /// written at once.
    fn queuing(&self);
}

/// The stream, shared by its writer task and the senders that write at once.
struct Gate<Out>(Mutex<Open<Out>>);

struct Open<Out> {
    /// The stream: `None` while the writer task writes to it, and once it failed.
    out: Option<Out>,
    /// Frames queued and not written yet.
    queued: usize,
}

impl<Out> Gate<Out> {
    fn lock(&self) -> MutexGuard<'_, Open<Out>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl<Out: AsyncWrite + Send + Unpin> Outlet for Gate<Out> {
    fn write_now(
        &self,
        frame: Vec<u8>,
        from: usize,
        queue: &mpsc::Sender<Frame>,
    ) -> Result<(), Vec<u8>> {
        let mut guard = self.lock();
        let open = &mut *guard;
        let (Some(out), 0) = (open.out.as_mut(), open.queued) else {
            return Err(frame);
        };
        // Written only as far as the stream takes it without waiting.
        let mut context = Context::from_waker(Waker::noop());
        let mut at = from;
        let mut broken = false;
        while at < frame.len() {
            match Pin::new(&mut *out).poll_write(&mut context, &frame[at..]) {
                Poll::Ready(Ok(n)) if n > 0 => at += n,
                Poll::Pending => break,
                Poll::Ready(_) => {
                    broken = true;
                    break;
                }
            }
        }
        if at == from && !broken {
            return Err(frame);
        }
        let rest = if broken {
            None
        } else if at < frame.len() {
            Some((frame, at))
        } else {
            match Pin::new(&mut *out).poll_flush(&mut context) {
                Poll::Ready(Ok(())) => {
                    SPARE.keep(frame);
                    return Ok(());
                }
                // The writer task flushes, writing nothing more.
                Poll::Pending => Some((Vec::new(), 0)),
                Poll::Ready(Err(_)) => None,
            }
        };
        let queued = rest.is_some_and(|(bytes, at)| {
            queue
                .try_send((bytes, at, None))
                .map(|()| open.queued += 1)
                .is_ok()
        });
        if !queued {
            // The stream failed, or a part of the message could not be queued after the
            // part written: it is closed, as when the writer task fails to write.
            open.out = None;
        }
        Ok(())
    }

    fn queuing(&self) {
        self.lock().queued += 1;
    }
}

/// Writes the queued frames in order, until every sender is gone or a write fails.
async fn write_frames<Out: AsyncWrite + Unpin>(
    gate: Arc<Gate<Out>>,
    mut queue: mpsc::Receiver<Frame>,
) {
    while let Some((bytes, from, done)) = queue.recv().await {
        let taken = gate.lock().out.take();
        let result = match taken {
            Some(mut out) => {
                let result = async {
                    out.write_all(bytes.get(from..).unwrap_or_default()).await?;
                    out.flush().await
                }
                .await;
                let mut open = gate.lock();
                open.queued = open.queued.saturating_sub(1);
                if result.is_ok() {
                    open.out = Some(out);
                }
                result
            }
            None => Err(closed()),
        };
        let failed = result.is_err();
        if let Some(done) = done {
            let _ = done.send(result);
        }
        SPARE.keep(bytes);
        if failed {
            return;
        }
    }
    let out = gate.lock().out.take();
    if let Some(mut out) = out {
        let _ = out.shutdown().await;
    }
}

/// The error of a send to a stream that is closed.
pub(super) fn closed() -> io::Error {
    io::Error::new(io::ErrorKind::NotConnected, "the stream is closed")
}

/// Writes whole messages to the stream, in order with everything else written to it.
/// It does not keep the stream open: once the transport is closed or dropped, the writer
/// ends (the peer sees EOF) and sending fails.
#[derive(Clone)]
pub struct RawSender {
    queue: mpsc::WeakSender<Frame>,
    outlet: Weak<dyn Outlet>,
}

impl RawSender {
    pub(super) fn new(queue: &mpsc::Sender<Frame>, outlet: &Arc<dyn Outlet>) -> Self {
        Self {
            queue: queue.downgrade(),
            outlet: Arc::downgrade(outlet),
        }
    }

    /// Sends one encoded message (without its newline).
    pub async fn send(&self, bytes: Vec<u8>) -> io::Result<()> {
        self.send_from(bytes, 0).await
    }

    /// Sends the message that starts at `from` in `bytes` (and runs to its end, without
    /// the newline): one built in place in a larger buffer, which is not copied.
    pub async fn send_from(&self, bytes: Vec<u8>, from: usize) -> io::Result<()> {
        let queue = self.queue.upgrade().ok_or_else(closed)?;
        let Err(bytes) = self.write_now(&queue, bytes, from) else {
            return Ok(());
        };
        let permit = queue.reserve().await.map_err(|_| closed())?;
        self.enqueue(permit, bytes, from);
        Ok(())
    }

    /// Sends one encoded message if it can go now (written, or queued with room to
    /// spare); gives it back if not (the queue is full, or the stream closed).
    pub fn try_send(&self, bytes: Vec<u8>) -> Result<(), Vec<u8>> {
        let Some(queue) = self.queue.upgrade() else {
            return Err(bytes);
        };
        let Err(bytes) = self.write_now(&queue, bytes, 0) else {
            return Ok(());
        };
        match queue.try_reserve() {
            Ok(permit) => {
                self.enqueue(permit, bytes, 0);
                Ok(())
            }
            Err(_) => Err(bytes),
        }
    }

    /// Writes the message `bytes[from..]` at once if the stream lets it; gives it back,
    /// without a newline, if it must be queued.
    fn write_now(
        &self,
        queue: &mpsc::Sender<Frame>,
        mut bytes: Vec<u8>,
        from: usize,
    ) -> Result<(), Vec<u8>> {
        let Some(outlet) = self.outlet.upgrade() else {
            return Err(bytes);
        };
        bytes.push(b'\n');
        outlet.write_now(bytes, from, queue).map_err(|mut bytes| {
            bytes.pop();
            bytes
        })
    }

    /// Queues the message `bytes[from..]` (without its newline) with `permit`.
    fn enqueue(&self, permit: mpsc::Permit<'_, Frame>, mut bytes: Vec<u8>, from: usize) {
        bytes.push(b'\n');
        if let Some(outlet) = self.outlet.upgrade() {
            outlet.queuing();
        }
        permit.send((bytes, from, None));
    }

    /// Whether `other` writes to the same stream.
    pub(super) fn same_stream(&self, other: &RawSender) -> bool {
        Weak::ptr_eq(&self.outlet, &other.outlet)
    }
}
