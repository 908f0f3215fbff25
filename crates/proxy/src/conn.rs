//! A client connection that can be closed with a TCP reset instead of a FIN, and that notes
//! the bytes it reads for the connection's watchdog.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

use crate::activity::Activity;

/// Shared flag: when set, the connection is closed with RST (SO_LINGER 0) when hyper drops it.
#[derive(Debug, Clone, Default)]
pub(crate) struct ResetFlag(Arc<AtomicBool>);

impl ResetFlag {
    /// Asks for a reset when the connection closes.
    pub(crate) fn set(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    /// Whether a reset was asked for.
    pub(crate) fn is_set(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

/// A TCP stream that honours a [`ResetFlag`] on close.
#[derive(Debug)]
pub(crate) struct ClientConn {
    inner: TcpStream,
    reset: ResetFlag,
    activity: Activity,
}

impl ClientConn {
    /// Wraps an accepted stream.
    pub(crate) fn new(inner: TcpStream, reset: ResetFlag, activity: Activity) -> Self {
        Self {
            inner,
            reset,
            activity,
        }
    }
}

impl Drop for ClientConn {
    fn drop(&mut self) {
        if self.reset.is_set() {
            let _ = socket2::SockRef::from(&self.inner).set_linger(Some(std::time::Duration::ZERO));
        }
    }
}

impl AsyncRead for ClientConn {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.inner).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            this.activity.read_bytes();
        }
        polled
    }
}

impl AsyncWrite for ClientConn {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.reset.is_set() {
            // A reset must not be preceded by a FIN: skip the orderly shutdown.
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut this.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}
