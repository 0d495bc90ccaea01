// Command client is the rsocket-go 0.8.12 interop client: it runs ONE interaction and prints
// the result as JSON (tests/interop/peers/README.md, "Command lines", "Result JSON").
//
//	client INTERACTION --port P [--host 127.0.0.1] [--data S | --data-b64 B | --data-size N]
//	       [--metadata S | --metadata-b64 B | --metadata-size N] [--request-n K] [--take M]
//	       [--count N] [--fragment N] [--completion frame] [--digest] [--timeout S]
//	       [--keepalive MS] [--lifetime MS] [--setup-data S] [--setup-metadata S]
//	       [--transport tcp|ws] [--path /P]
//
// Exit codes: 0 success, 1 the peer sent ERROR, 2 failure/timeout, 3 unsupported.
// --fragment N is rsocket-go's Fragment(mtu) (a frame is at most N bytes without the 3-byte
// length prefix, 10 <= N <= 2^24-4).  rsocket-go completes a channel's outbound side with a
// separate PAYLOAD[C] only: --completion flag exits with code 3 for request-channel.
package main

import (
	"context"
	"encoding/base64"
	"fmt"
	"net"
	"os"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	rsocket "github.com/rsocket/rsocket-go"
	"github.com/rsocket/rsocket-go/core"
	"github.com/rsocket/rsocket-go/core/transport"
	"github.com/rsocket/rsocket-go/payload"
	"github.com/rsocket/rsocket-go/rx"
	"github.com/rsocket/rsocket-go/rx/flux"

	"rsocket-tx-interop/go-peer/internal/peer"
)

const octetStream = "application/octet-stream"

var interactions = map[string]bool{
	"request-response": true, "fire-and-forget": true, "metadata-push": true,
	"request-stream": true, "request-channel": true,
}

type options struct {
	interaction string
	port        int
	data        peer.Payload
	requestN    int
	take        int
	count       int
	fragment    int
	completion  string
	mode        string
	timeout     int
	keepalive   int
	lifetime    int
	setup       *peer.Payload
	transport   *peer.Transport
}

func parse(args []string) options {
	if len(args) < 1 || !interactions[args[0]] {
		peer.Fail("usage: client INTERACTION --port P [options]; INTERACTION is one of " +
			"request-response, fire-and-forget, metadata-push, request-stream, request-channel")
	}
	o := options{interaction: args[0]}
	f := peer.NewFlags("client")
	var data, dataB64, metadata, metadataB64, setupData, setupMetadata string
	var dataSize, metadataSize int
	var digest bool
	f.IntVar(&o.port, "port", -1, "port")
	f.StringVar(&data, "data", "", "data (UTF-8)")
	f.StringVar(&dataB64, "data-b64", "", "data (base64)")
	f.IntVar(&dataSize, "data-size", 0, "data: N bytes of the pattern")
	f.StringVar(&metadata, "metadata", "", "metadata (UTF-8)")
	f.StringVar(&metadataB64, "metadata-b64", "", "metadata (base64)")
	f.IntVar(&metadataSize, "metadata-size", 0, "metadata: N bytes of the pattern")
	f.IntVar(&o.requestN, "request-n", peer.MaxRequestN, "credit batch")
	f.IntVar(&o.take, "take", 0, "cancel after M payloads")
	f.IntVar(&o.count, "count", 3, "channel payloads")
	f.IntVar(&o.fragment, "fragment", 0, "rsocket-go Fragment(mtu)")
	f.StringVar(&o.completion, "completion", "frame", "flag|frame")
	f.BoolVar(&digest, "digest", false, "sha256 and length instead of the payloads")
	f.IntVar(&o.timeout, "timeout", 30, "seconds")
	f.IntVar(&o.keepalive, "keepalive", 20000, "ms")
	f.IntVar(&o.lifetime, "lifetime", 90000, "ms")
	f.StringVar(&setupData, "setup-data", "", "SETUP data")
	f.StringVar(&setupMetadata, "setup-metadata", "", "SETUP metadata")
	o.transport = f.AddTransport()
	f.Parse(args[1:])
	o.transport.Check()
	if o.port < 0 {
		peer.Fail("usage: --port is required")
	}
	if exclusive(f, "data", "data-b64", "data-size") || exclusive(f, "metadata", "metadata-b64", "metadata-size") {
		peer.Fail("usage: give one of --data/--data-b64/--data-size and one of --metadata/--metadata-b64/--metadata-size")
	}
	o.data.Data = []byte(data)
	if f.Given("data-b64") {
		o.data.Data = decode(dataB64)
	} else if f.Given("data-size") {
		o.data.Data = peer.Pattern(dataSize)
	}
	o.data.HasMetadata = f.Given("metadata") || f.Given("metadata-b64") || f.Given("metadata-size")
	switch {
	case f.Given("metadata"):
		o.data.Metadata = []byte(metadata)
	case f.Given("metadata-b64"):
		o.data.Metadata = decode(metadataB64)
	case f.Given("metadata-size"):
		o.data.Metadata = peer.Pattern(metadataSize)
	}
	if f.Given("setup-data") || f.Given("setup-metadata") {
		o.setup = &peer.Payload{Data: []byte(setupData), Metadata: []byte(setupMetadata),
			HasMetadata: f.Given("setup-metadata")}
	}
	o.mode = "full"
	if digest || f.Given("data-size") || f.Given("metadata-size") {
		o.mode = "digest"
	}
	if o.count < 1 {
		peer.Fail("usage: --count must be >= 1 (the first payload travels in REQUEST_CHANNEL)")
	}
	if o.requestN < 1 {
		peer.Fail("usage: --request-n must be >= 1")
	}
	if o.completion != "flag" && o.completion != "frame" {
		peer.Fail("usage: --completion must be flag or frame")
	}
	if o.completion == "flag" && o.interaction == "request-channel" {
		peer.Unsupported("rsocket-go's channel requester always completes its outbound side " +
			"with a separate PAYLOAD[C] (requestChannelSubscriber.OnComplete) and never sets C " +
			"on REQUEST_CHANNEL or on a PAYLOAD with N")
	}
	if f.Given("fragment") && (o.fragment < peer.MinFragment || o.fragment > peer.MaxFragment) {
		peer.Unsupported(fmt.Sprintf("rsocket-go fragment size must be in [%d, %d] (bytes per "+
			"frame without the 3-byte length prefix)", peer.MinFragment, peer.MaxFragment))
	}
	return o
}

func exclusive(f *peer.Flags, names ...string) bool {
	given := 0
	for _, name := range names {
		if f.Given(name) {
			given++
		}
	}
	return given > 1
}

func decode(text string) []byte {
	out, err := base64.StdEncoding.DecodeString(text)
	if err != nil {
		peer.Fail("usage: bad base64: %s", err)
	}
	return out
}

func main() {
	o := parse(os.Args[1:])
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(o.timeout)*time.Second)
	defer cancel()
	type outcome struct {
		code   int
		result map[string]any
	}
	done := make(chan outcome, 1)
	go func() {
		code, result := run(ctx, o)
		done <- outcome{code, result}
	}()
	select {
	case out := <-done:
		result := map[string]any{"peer": peer.Name, "interaction": o.interaction}
		for k, v := range out.result {
			result[k] = v
		}
		peer.Finish(out.code, result)
	case <-ctx.Done():
		peer.Fail("timeout after %d s", o.timeout)
	}
}

// run connects, runs the interaction, closes the connection once what had to be written was
// written, and returns the exit code and the result fields.
func run(ctx context.Context, o options) (int, map[string]any) {
	wire := &recorder{}
	wire.cond = sync.NewCond(&wire.mu)
	builder := rsocket.Connect().
		DataMimeType(octetStream).
		MetadataMimeType(octetStream).
		KeepAlive(time.Duration(o.keepalive)*time.Millisecond, time.Duration(o.lifetime)*time.Millisecond, 1)
	if o.fragment > 0 {
		builder = builder.Fragment(o.fragment)
	}
	if o.setup != nil {
		builder = builder.SetupPayload(o.setup.ToPayload())
	}
	client, err := builder.Transport(clientTransport(o, wire)).Start(ctx)
	if err != nil {
		peer.Fail("connect: %s", err)
	}
	defer func() { _ = client.Close() }()
	request := o.data.ToPayload()
	describe := func(p peer.Payload) map[string]any { return peer.Describe(p, o.mode) }
	switch o.interaction {
	case "request-response":
		response, release, err := client.RequestResponse(request).BlockUnsafe(ctx)
		if err != nil {
			return failure(err, nil)
		}
		got := peer.Copy(response)
		release()
		return peer.ExitOK, map[string]any{"payload": describe(got)}
	case "fire-and-forget":
		client.FireAndForget(request)
		// the last frame of the request: REQUEST_FNF or PAYLOAD without F on stream 1
		wire.wait(ctx, func(w written) bool { return w.stream != 0 && !w.flags.Check(core.FlagFollow) })
		return peer.ExitOK, map[string]any{"sent": true}
	case "metadata-push":
		client.MetadataPush(payload.New(nil, o.data.Metadata))
		wire.wait(ctx, func(w written) bool { return w.kind == core.FrameTypeMetadataPush })
		return peer.ExitOK, map[string]any{"sent": true}
	}
	collector := newCollector(o, describe)
	var source flux.Flux
	if o.interaction == "request-stream" {
		source = client.RequestStream(request)
	} else {
		items := make([]payload.Payload, o.count)
		for i := range items {
			items[i] = peer.Payload{Data: []byte(fmt.Sprint(i)), Metadata: o.data.Metadata,
				HasMetadata: o.data.HasMetadata}.ToPayload()
		}
		source = client.RequestChannel(outbound(items))
	}
	source.SubscribeWith(ctx, collector)
	select {
	case <-collector.done:
	case <-ctx.Done():
		peer.Fail("timeout after %d s (%d payloads received)", o.timeout, len(collector.payloads))
	}
	collector.mu.Lock()
	defer collector.mu.Unlock()
	if collector.err != nil {
		return failure(collector.err, collector.payloads)
	}
	if collector.cancelled && o.interaction == "request-stream" {
		// rsocket-go queues the CANCEL; closing first could drop it
		wire.wait(ctx, func(w written) bool { return w.kind == core.FrameTypeCancel })
	}
	return peer.ExitOK, map[string]any{"payloads": collector.payloads,
		"completed": collector.completed, "cancelled": collector.cancelled}
}

func failure(err error, payloads []map[string]any) (int, map[string]any) {
	info := peer.ErrorInfo(err)
	if info == nil {
		peer.Fail("%s", err)
	}
	result := map[string]any{"error": info}
	if payloads != nil {
		result["payloads"] = payloads
	}
	return peer.ExitRSocketErr, result
}

// outbound is the channel's outbound Flux: rsocket-go requests 1 (the payload that goes into
// REQUEST_CHANNEL), then whatever the responder's REQUEST_Ns grant; reactor-go's buffered sink
// emits only that.  Complete() waits until every item has gone.
func outbound(items []payload.Payload) flux.Flux {
	return flux.Create(func(_ context.Context, sink flux.Sink) {
		go func() {
			for _, item := range items {
				sink.Next(item)
			}
			sink.Complete()
		}()
	})
}

// collector receives a stream or channel: requests --request-n, again after every
// --request-n payloads, and cancels after --take.
type collector struct {
	o            options
	describe     func(peer.Payload) map[string]any
	mu           sync.Mutex
	subscription rx.Subscription
	payloads     []map[string]any
	since        int
	completed    bool
	cancelled    bool
	err          error
	finished     bool
	done         chan struct{}
}

func newCollector(o options, describe func(peer.Payload) map[string]any) *collector {
	return &collector{o: o, describe: describe, payloads: []map[string]any{}, done: make(chan struct{})}
}

func (c *collector) finish() {
	c.finished = true
	close(c.done)
}

func (c *collector) OnSubscribe(_ context.Context, s rx.Subscription) {
	c.mu.Lock()
	c.subscription = s
	c.mu.Unlock()
	s.Request(c.o.requestN)
}

func (c *collector) OnNext(value payload.Payload) {
	got := peer.Copy(value)
	c.mu.Lock()
	if c.finished {
		c.mu.Unlock()
		return
	}
	c.payloads = append(c.payloads, c.describe(got))
	c.since++
	if c.o.take > 0 && len(c.payloads) >= c.o.take {
		c.cancelled = true
		c.finish()
		c.mu.Unlock()
		c.subscription.Cancel()
		return
	}
	more := c.since >= c.o.requestN
	if more {
		c.since = 0
	}
	c.mu.Unlock()
	if more {
		c.subscription.Request(c.o.requestN)
	}
}

func (c *collector) OnError(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.finished {
		c.err = err
		c.finish()
	}
}

func (c *collector) OnComplete() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.finished {
		c.completed = true
		c.finish()
	}
}

// clientTransport connects like rsocket.TCPClient()/WebsocketClient() do (the same
// constructors), with the connection wrapped in a recorder of the frames written.
func clientTransport(o options, wire *recorder) transport.ClientTransporter {
	address := net.JoinHostPort(o.transport.Host, fmt.Sprint(o.port))
	if o.transport.Kind == "tcp" {
		return func(ctx context.Context) (*transport.Transport, error) {
			var dialer net.Dialer
			conn, err := dialer.DialContext(ctx, "tcp", address)
			if err != nil {
				return nil, err
			}
			wire.Conn = transport.NewTCPConn(conn)
			return transport.NewTransport(wire), nil
		}
	}
	url := "ws://" + address + o.transport.Path
	return func(ctx context.Context) (*transport.Transport, error) {
		dialer := &websocket.Dialer{HandshakeTimeout: 45 * time.Second}
		conn, _, err := dialer.DialContext(ctx, url, nil)
		if err != nil {
			return nil, fmt.Errorf("dial websocket %s failed: %w", url, err)
		}
		wire.Conn = transport.NewWebsocketConnection(conn)
		return transport.NewTransport(wire), nil
	}
}

type written struct {
	kind   core.FrameType
	stream uint32
	flags  core.FrameFlag
}

// recorder is a transport.Conn that remembers every frame written and flushed, so the client
// can wait for its last frame before closing: rsocket-go's Close() stops the writer without
// draining the frames still queued.
type recorder struct {
	transport.Conn
	mu      sync.Mutex
	cond    *sync.Cond
	pending []written
	flushed []written
}

func (r *recorder) Write(frame core.WriteableFrame) error {
	h := frame.Header()
	err := r.Conn.Write(frame)
	r.mu.Lock()
	r.pending = append(r.pending, written{h.Type(), h.StreamID(), h.Flag()})
	r.mu.Unlock()
	return err
}

func (r *recorder) Flush() error {
	err := r.Conn.Flush()
	r.mu.Lock()
	r.flushed = append(r.flushed, r.pending...)
	r.pending = r.pending[:0]
	r.mu.Unlock()
	r.cond.Broadcast()
	return err
}

func (r *recorder) Addr() string {
	if a, ok := r.Conn.(transport.AddrConn); ok {
		return a.Addr()
	}
	return ""
}

// wait blocks until a flushed frame satisfies match, or ctx ends.
func (r *recorder) wait(ctx context.Context, match func(written) bool) {
	stop := context.AfterFunc(ctx, func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.cond.Broadcast()
	})
	defer stop()
	r.mu.Lock()
	defer r.mu.Unlock()
	for {
		for _, w := range r.flushed {
			if match(w) {
				return
			}
		}
		if ctx.Err() != nil {
			return
		}
		r.cond.Wait()
	}
}
