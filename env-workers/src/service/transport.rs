//! The env-worker's tarpc transport: length-delimited frames of the protocol [`Codec`] (size
//! limit and decoded-memory budget), a request frame limit, client deadlines clamped, and a
//! read and an idle timeout on the server side.
//!
//! ```text
//!  TcpStream ─► frames (u32 length; requests ≤ max_request_bytes, replies ≤ MAX_FRAME_BYTES)
//!            ─► Codec::decode (version byte, bincode, memory ≤ 8× the frame)
//!            ─► ClientMessage: deadline = now + min(sent, max_deadline)   (never overflows)
//!  server:   a begun frame must finish within read_timeout; no frame for idle_timeout closes
//! ```

use std::future::Future;
use std::io;
use std::marker::PhantomData;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use futures::{Sink, Stream};
use protocol::codec::Codec;
use protocol::error::CodecError;
use serde::{Deserialize, Serialize};
use tarpc::{ClientMessage, Request, Response};
use tokio::net::TcpStream;
use tokio::time::Sleep;
use tokio_util::bytes::{Bytes, BytesMut};
use tokio_util::codec::{Decoder, Encoder, Framed, LengthDelimitedCodec};

/// Largest reply frame, and the codec's size limit, in bytes.
pub const MAX_FRAME_BYTES: usize = 16 << 20;

type DecodeFn<In> = Box<dyn Fn(&[u8]) -> Result<In, CodecError> + Send + Sync>;

/// Frames and (de)serializes one direction pair; remembers when the pending frame began.
pub struct FrameCodec<In, Out> {
    read: LengthDelimitedCodec,
    write: LengthDelimitedCodec,
    codec: Codec,
    decode: DecodeFn<In>,
    started: Option<Instant>,
    out: PhantomData<fn(Out)>,
}

fn invalid(e: impl std::fmt::Display) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e.to_string())
}

impl<In, Out> FrameCodec<In, Out> {
    fn new(max_in: usize, decode: DecodeFn<In>) -> Self {
        let frames = |max| LengthDelimitedCodec::builder().max_frame_length(max).new_codec();
        Self {
            read: frames(max_in),
            write: frames(MAX_FRAME_BYTES),
            codec: Codec::new(MAX_FRAME_BYTES as u64),
            decode,
            started: None,
            out: PhantomData,
        }
    }
}

impl<In, Out> Decoder for FrameCodec<In, Out> {
    type Item = In;
    type Error = io::Error;

    fn decode(&mut self, src: &mut BytesMut) -> io::Result<Option<In>> {
        let had = src.len();
        match self.read.decode(src)? {
            Some(frame) => {
                self.started = (!src.is_empty()).then(Instant::now);
                (self.decode)(&frame).map(Some).map_err(invalid)
            }
            None => {
                if had > 0 && self.started.is_none() {
                    self.started = Some(Instant::now());
                }
                Ok(None)
            }
        }
    }
}

impl<In, Out: Serialize> Encoder<Out> for FrameCodec<In, Out> {
    type Error = io::Error;

    fn encode(&mut self, item: Out, dst: &mut BytesMut) -> io::Result<()> {
        let bytes = self.codec.encode(&item).map_err(invalid)?;
        self.write.encode(Bytes::from(bytes), dst)
    }
}

/// Read and idle deadlines of a server connection.
#[derive(Debug, Clone, Copy)]
pub struct Timeouts {
    /// A begun frame must be whole within this.
    pub read: Duration,
    /// A connection sending nothing this long is closed.
    pub idle: Duration,
}

/// A framed connection, as a tarpc transport.
pub struct Conn<In, Out> {
    framed: Framed<TcpStream, FrameCodec<In, Out>>,
    timeouts: Option<Timeouts>,
    timer: Pin<Box<Sleep>>,
    last_frame: Instant,
}

impl<In, Out> Conn<In, Out> {
    fn new(stream: TcpStream, codec: FrameCodec<In, Out>, timeouts: Option<Timeouts>) -> Self {
        Self {
            framed: Framed::new(stream, codec),
            timeouts,
            timer: Box::pin(tokio::time::sleep(Duration::ZERO)),
            last_frame: Instant::now(),
        }
    }

    fn expired(&mut self, cx: &mut Context<'_>) -> Option<io::Error> {
        let t = self.timeouts?;
        let (deadline, what) = match self.framed.codec().started {
            Some(began) => (began + t.read, format!("a request frame not whole within {:?}", t.read)),
            None => (self.last_frame + t.idle, format!("no request for {:?}", t.idle)),
        };
        self.timer.as_mut().reset(deadline.into());
        match self.timer.as_mut().poll(cx) {
            Poll::Ready(()) => Some(io::Error::new(io::ErrorKind::TimedOut, what)),
            Poll::Pending => None,
        }
    }
}

impl<In, Out> Stream for Conn<In, Out> {
    type Item = io::Result<In>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<io::Result<In>>> {
        let this = self.get_mut();
        match Pin::new(&mut this.framed).poll_next(cx) {
            Poll::Ready(Some(Ok(item))) => {
                this.last_frame = Instant::now();
                Poll::Ready(Some(Ok(item)))
            }
            Poll::Pending => this.expired(cx).map_or(Poll::Pending, |e| Poll::Ready(Some(Err(e)))),
            other => other,
        }
    }
}

impl<In, Out: Serialize> Sink<Out> for Conn<In, Out> {
    type Error = io::Error;

    fn poll_ready(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().framed).poll_ready(cx)
    }

    fn start_send(self: Pin<&mut Self>, item: Out) -> io::Result<()> {
        Pin::new(&mut self.get_mut().framed).start_send(item)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().framed).poll_flush(cx)
    }

    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().framed).poll_close(cx)
    }
}

/// `tarpc::ClientMessage` as it is on the wire, with the deadline still a relative duration
/// (tarpc's own decoding adds it to now unchecked, which panics for 2^64−1 s).
#[derive(Deserialize)]
enum WireMessage<T> {
    Request(WireRequest<T>),
    Cancel { trace_context: tarpc::trace::Context, request_id: u64 },
}

#[derive(Deserialize)]
struct WireRequest<T> {
    context: WireContext,
    id: u64,
    message: T,
}

#[derive(Deserialize)]
struct WireContext {
    deadline: Duration,
    trace_context: tarpc::trace::Context,
}

/// Decodes a client message, clamping its deadline to `max_deadline` from now.
pub fn decode_request<T: serde::de::DeserializeOwned>(
    codec: &Codec,
    bytes: &[u8],
    max_deadline: Duration,
) -> Result<ClientMessage<T>, CodecError> {
    Ok(match codec.decode::<WireMessage<T>>(bytes)? {
        WireMessage::Request(r) => {
            let mut context = tarpc::context::current();
            context.deadline = Instant::now() + r.context.deadline.min(max_deadline);
            context.trace_context = r.context.trace_context;
            ClientMessage::Request(Request { context, id: r.id, message: r.message })
        }
        WireMessage::Cancel { trace_context, request_id } => ClientMessage::Cancel { trace_context, request_id },
    })
}

/// The server's transport on an accepted, authenticated stream.
pub fn server<Req, Resp>(
    stream: TcpStream,
    max_request_bytes: usize,
    max_deadline: Duration,
    timeouts: Timeouts,
) -> Conn<ClientMessage<Req>, Response<Resp>>
where
    Req: serde::de::DeserializeOwned + 'static,
    Resp: Serialize,
{
    let codec = Codec::new(MAX_FRAME_BYTES as u64);
    let decode: DecodeFn<ClientMessage<Req>> = Box::new(move |b| decode_request(&codec, b, max_deadline));
    Conn::new(stream, FrameCodec::new(max_request_bytes, decode), Some(timeouts))
}

/// The client's transport on a connected, authenticated stream.
pub fn client<Req, Resp>(stream: TcpStream) -> Conn<Response<Resp>, ClientMessage<Req>>
where
    Req: Serialize,
    Resp: serde::de::DeserializeOwned + 'static,
{
    let codec = Codec::new(MAX_FRAME_BYTES as u64);
    let decode: DecodeFn<Response<Resp>> = Box::new(move |b| codec.decode(b));
    Conn::new(stream, FrameCodec::new(MAX_FRAME_BYTES, decode), None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(deadline_in: Duration) -> Vec<u8> {
        let mut context = tarpc::context::current();
        context.deadline = Instant::now() + deadline_in;
        let msg: ClientMessage<String> = ClientMessage::Request(Request { context, id: 9, message: "hi".into() });
        Codec::default().encode(&msg).unwrap()
    }

    #[test]
    fn the_wire_mirror_reads_what_tarpc_writes() {
        let bytes = request(Duration::from_secs(30));
        let Ok(ClientMessage::Request(r)) =
            decode_request::<String>(&Codec::default(), &bytes, Duration::from_secs(600))
        else {
            panic!("a request")
        };
        assert_eq!((r.id, r.message.as_str()), (9, "hi"));
        let left = r.context.deadline - Instant::now();
        assert!(left > Duration::from_secs(29) && left <= Duration::from_secs(30), "{left:?}");
    }

    #[test]
    fn huge_deadlines_are_clamped_not_panicking() {
        let mut bytes = request(Duration::from_secs(1));
        // Rewrite the deadline's seconds (varint after the version byte and the variant index)
        // to u64::MAX: 0xFD marker + 8 bytes. The seconds are the first field: byte 2 on.
        let tail = bytes.split_off(3);
        bytes.truncate(2);
        bytes.push(0xFD);
        bytes.extend(u64::MAX.to_le_bytes());
        bytes.extend(tail);
        let max = Duration::from_secs(600);
        let Ok(ClientMessage::Request(r)) = decode_request::<String>(&Codec::default(), &bytes, max) else {
            panic!("a request")
        };
        assert!(r.context.deadline <= Instant::now() + max);
        let Ok(ClientMessage::Request(r)) =
            decode_request::<String>(&Codec::default(), &request(Duration::from_secs(100_000_000)), max)
        else {
            panic!("a request")
        };
        assert!(r.context.deadline <= Instant::now() + max);
    }
}
