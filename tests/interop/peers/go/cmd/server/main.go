// Command server is the rsocket-go 0.8.12 interop server: the demo responder over TCP or
// WebSocket (tests/interop/peers/README.md, "Command lines", "Server events", "The demo
// responders").
//
//	server [--port P] [--host 127.0.0.1] [--fragment N] [--completion frame] [--request-n K]
//	       [--timeout S] [--watch-stdin] [--transport tcp|ws] [--path /P]
//
// It prints "LISTENING <port>" once bound, then one JSON event per line.  --fragment N is
// rsocket-go's Fragment(mtu): a frame is at most N bytes without the 3-byte length prefix,
// 10 <= N <= 2^24-4.  rsocket-go always completes streams and channels with a separate
// PAYLOAD[C]: --completion flag exits with code 3.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	rsocket "github.com/rsocket/rsocket-go"
	"github.com/rsocket/rsocket-go/core"
	"github.com/rsocket/rsocket-go/core/framing"
	"github.com/rsocket/rsocket-go/core/transport"
	"github.com/rsocket/rsocket-go/payload"
	"github.com/rsocket/rsocket-go/rx"
	"github.com/rsocket/rsocket-go/rx/flux"
	"github.com/rsocket/rsocket-go/rx/mono"

	"rsocket-tx-interop/go-peer/internal/peer"
)

type options struct {
	port       int
	fragment   int
	completion string
	requestN   int
	timeout    int
	watchStdin bool
	transport  *peer.Transport
}

func parse(args []string) options {
	var o options
	f := peer.NewFlags("server")
	f.IntVar(&o.port, "port", 0, "port (0: any free one)")
	f.IntVar(&o.fragment, "fragment", 0, "rsocket-go Fragment(mtu)")
	f.StringVar(&o.completion, "completion", "frame", "flag|frame")
	f.IntVar(&o.requestN, "request-n", 256, "credit batch of the echo channel")
	f.IntVar(&o.timeout, "timeout", 600, "seconds")
	f.BoolVar(&o.watchStdin, "watch-stdin", false, "stop at stdin EOF")
	o.transport = f.AddTransport()
	f.Parse(args)
	o.transport.Check()
	if o.completion != "flag" && o.completion != "frame" {
		peer.Fail("usage: --completion must be flag or frame")
	}
	if o.requestN < 1 {
		peer.Fail("usage: --request-n must be >= 1")
	}
	if o.completion == "flag" {
		peer.Unsupported("rsocket-go completes every responder stream and channel with a separate " +
			"PAYLOAD[C] (requestStreamSubscriber/respondChannelSubscriber.OnComplete); the " +
			"application cannot put C on the last PAYLOAD")
	}
	if f.Given("fragment") && (o.fragment < peer.MinFragment || o.fragment > peer.MaxFragment) {
		peer.Unsupported(fmt.Sprintf("rsocket-go fragment size must be in [%d, %d] (bytes per "+
			"frame without the 3-byte length prefix)", peer.MinFragment, peer.MaxFragment))
	}
	if !f.Given("fragment") {
		o.fragment = 0 // rsocket-go: no fragmentation (its maximum frame size)
	}
	return o
}

func main() {
	o := parse(os.Args[1:])
	listener, err := net.Listen("tcp", net.JoinHostPort(o.transport.Host, fmt.Sprint(o.port)))
	if err != nil {
		peer.Fail("listen: %s", err)
	}
	port := listener.Addr().(*net.TCPAddr).Port
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan string, 2)
	go func() {
		select {
		case <-time.After(time.Duration(o.timeout) * time.Second):
			stopped <- "timeout"
		case <-ctx.Done():
		}
	}()
	if o.watchStdin {
		go func() {
			_, _ = io.Copy(io.Discard, os.Stdin)
			stopped <- "stdin closed"
		}()
	}

	// rsocket.TCPServer()/WebsocketServer() take a fixed address; the same transports are
	// built here from our own listener so that port 0 can be reported.
	listen := func(context.Context) (net.Listener, error) { return listener, nil }
	var serverTransport transport.ServerTransporter
	if o.transport.Kind == "tcp" {
		serverTransport = func(context.Context) (transport.ServerTransport, error) {
			return transport.NewTCPServerTransport(listen), nil
		}
	} else {
		serverTransport = func(context.Context) (transport.ServerTransport, error) {
			return transport.NewWebsocketServerTransport(listen, o.transport.Path, nil), nil
		}
	}
	builder := rsocket.Receive().
		OnStart(func() { peer.Println(fmt.Sprintf("LISTENING %d", port)) })
	if o.fragment > 0 {
		builder = builder.Fragment(o.fragment)
	}
	served := make(chan error, 1)
	go func() {
		served <- builder.
			Acceptor(func(_ context.Context, setup payload.SetupPayload, _ rsocket.CloseableRSocket) (rsocket.RSocket, error) {
				setupEvent(setup)
				if message, ok := strings.CutPrefix(string(setup.Data()), "reject:"); ok {
					// rsocket-go answers an acceptor error with ERROR[REJECTED_SETUP] carrying
					// its text, then closes the connection
					peer.Emit(map[string]any{"event": "setup_rejected", "message": message})
					return nil, errors.New(message)
				}
				return demoResponder(o), nil
			}).
			Transport(serverTransport).
			Serve(ctx)
	}()
	select {
	case reason := <-stopped:
		peer.Emit(map[string]any{"event": "stopping", "reason": reason})
		cancel()
		peer.Finish(peer.ExitOK, nil)
	case err := <-served:
		peer.Fail("server stopped: %v", err)
	}
}

func setupEvent(setup payload.SetupPayload) {
	p := peer.Copy(setup)
	extra := map[string]any{
		"version":            []int{int(setup.Version().Major()), int(setup.Version().Minor())},
		"keepalive":          setup.TimeBetweenKeepalive().Milliseconds(),
		"lifetime":           setup.MaxLifetime().Milliseconds(),
		"data_mime_type":     setup.DataMimeType(),
		"metadata_mime_type": setup.MetadataMimeType(),
	}
	if frame, ok := setup.(*framing.SetupFrame); ok {
		extra["lease"] = frame.HasFlag(core.FlagLease)
		extra["resume"] = frame.HasFlag(core.FlagResume)
	}
	peer.Event("setup", &p, extra)
}

func demoResponder(o options) rsocket.RSocket {
	return rsocket.NewAbstractSocket(
		rsocket.RequestResponse(func(request payload.Payload) mono.Mono {
			p := peer.Copy(request)
			peer.Event("request", &p, map[string]any{"interaction": "request-response"})
			if message, ok := peer.ErrorRequested(p.Data); ok {
				return mono.Error(errors.New(message))
			}
			return mono.Just(p.ToPayload())
		}),
		rsocket.FireAndForget(func(request payload.Payload) {
			p := peer.Copy(request)
			peer.Event("fnf", &p, nil)
		}),
		rsocket.MetadataPush(func(request payload.Payload) {
			p := peer.Copy(request)
			described := peer.Describe(p, "both")
			peer.Emit(map[string]any{"event": "metadata_push", "metadata": described["metadata"],
				"metadata_len": described["metadata_len"], "metadata_sha256": described["metadata_sha256"]})
		}),
		rsocket.RequestStream(func(request payload.Payload) flux.Flux {
			p := peer.Copy(request)
			peer.Event("request", &p, map[string]any{"interaction": "request-stream"})
			if message, ok := peer.ErrorRequested(p.Data); ok {
				return flux.Error(errors.New(message))
			}
			count, err := peer.StreamCount(p.Data)
			if err != nil {
				return flux.Error(err)
			}
			out := newEmitter("request-stream", true)
			items := make([]payload.Payload, count)
			for i := range items {
				items[i] = payload.New([]byte(fmt.Sprint(i)), nil)
			}
			out.push(items...)
			out.finish()
			return out.flux()
		}),
		rsocket.RequestChannel(func(requests flux.Flux) flux.Flux {
			out := newEmitter("request-channel", false)
			requests.SubscribeWith(context.Background(), &echoInbound{out: out, batch: o.requestN})
			return out.flux()
		}),
	)
}

// emitter is the responder's outbound Publisher (rsocket-go's flux.Create): it emits queued
// payloads only as the requester's credit (request(n), i.e. the initial request n and every
// REQUEST_N) allows, completes once finished and drained (rsocket-go then writes a separate
// PAYLOAD[C]), or fails.  The producer runs in its own goroutine: rsocket-go calls request(n)
// from its frame reader, and its buffered sink blocks when it holds more than 256 items.
type emitter struct {
	interaction string
	countSent   bool // the cancel event carries "sent" (request-stream)
	mu          sync.Mutex
	cond        *sync.Cond
	demand      int64
	queue       []payload.Payload
	finished    bool
	err         error
	cancelled   bool
	sent        int
	requests    int
}

func newEmitter(interaction string, countSent bool) *emitter {
	e := &emitter{interaction: interaction, countSent: countSent}
	e.cond = sync.NewCond(&e.mu)
	return e
}

func (e *emitter) push(items ...payload.Payload) {
	e.mu.Lock()
	e.queue = append(e.queue, items...)
	e.mu.Unlock()
	e.cond.Broadcast()
}

func (e *emitter) finish() {
	e.mu.Lock()
	e.finished = true
	e.mu.Unlock()
	e.cond.Broadcast()
}

func (e *emitter) fail(err error) {
	e.mu.Lock()
	if e.err == nil {
		e.err = err
	}
	e.mu.Unlock()
	e.cond.Broadcast()
}

// stop ends the emission without a signal (the channel's inbound side failed).
func (e *emitter) stop() {
	e.mu.Lock()
	e.cancelled = true
	e.mu.Unlock()
	e.cond.Broadcast()
}

func (e *emitter) flux() flux.Flux {
	return flux.Create(func(_ context.Context, sink flux.Sink) {
		go e.run(sink)
	}).DoOnRequest(func(n int) {
		e.mu.Lock()
		initial := e.requests == 0
		e.requests++
		e.demand += int64(n)
		e.mu.Unlock()
		peer.Emit(map[string]any{"event": "request_n", "interaction": e.interaction, "n": n,
			"initial": initial})
		e.cond.Broadcast()
	}).DoFinally(func(signal rx.SignalType) {
		if signal != rx.SignalCancel {
			return
		}
		e.mu.Lock()
		already := e.cancelled
		e.cancelled = true
		sent := e.sent
		e.mu.Unlock()
		e.cond.Broadcast()
		if !already {
			event := map[string]any{"event": "cancel", "interaction": e.interaction}
			if e.countSent {
				event["sent"] = sent
			}
			peer.Emit(event)
		}
	})
}

func (e *emitter) run(sink flux.Sink) {
	for {
		e.mu.Lock()
		for !e.cancelled && e.err == nil && !(e.demand > 0 && len(e.queue) > 0) &&
			!(e.finished && len(e.queue) == 0) {
			e.cond.Wait()
		}
		switch {
		case e.cancelled:
			e.mu.Unlock()
			return
		case e.err != nil:
			err := e.err
			e.mu.Unlock()
			sink.Error(err)
			return
		case e.demand > 0 && len(e.queue) > 0:
			item := e.queue[0]
			e.queue = e.queue[1:]
			e.demand--
			e.sent++
			e.mu.Unlock()
			if !safeNext(sink, item) {
				return
			}
		default:
			e.mu.Unlock()
			sink.Complete()
			return
		}
	}
}

// safeNext is sink.Next, false if a concurrent CANCEL closed the sink's queue under it
// (reactor-go's buffered sink then panics with "send on closed channel").
func safeNext(sink flux.Sink, item payload.Payload) (ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	sink.Next(item)
	return true
}

// echoInbound subscribes to the requester's channel payloads (the first one, from
// REQUEST_CHANNEL, included: rsocket-go delivers it through the same Flux) and queues their
// echo.  Credit: --request-n at subscription, then again every --request-n payloads received
// (counting the first: rsocket-go's processor only delivers what was requested, so the count
// must include it or the last payload of a batch would wait forever).
type echoInbound struct {
	out          *emitter
	batch        int
	subscription rx.Subscription
	received     int
	completed    bool
}

func (in *echoInbound) OnSubscribe(_ context.Context, s rx.Subscription) {
	in.subscription = s
	s.Request(in.batch)
}

func (in *echoInbound) OnNext(value payload.Payload) {
	p := peer.Copy(value)
	complete := p.Flags.Check(core.FlagComplete)
	in.received++
	if in.received == 1 {
		peer.Event("request", &p, map[string]any{"interaction": "request-channel",
			"complete": complete && p.Type == core.FrameTypeRequestChannel})
		if message, ok := peer.ErrorRequested(p.Data); ok {
			in.out.fail(errors.New(message))
			return
		}
	} else {
		peer.Event("channel_next", &p, map[string]any{"complete": complete})
		if complete {
			in.completed = true
			peer.Emit(map[string]any{"event": "channel_inbound_complete", "form": "flag"})
		}
	}
	in.out.push(p.ToPayload())
	if !complete && in.received%in.batch == 0 {
		in.subscription.Request(in.batch)
	}
}

func (in *echoInbound) OnError(err error) {
	event := map[string]any{"event": "channel_inbound_error", "message": err.Error()}
	if info := peer.ErrorInfo(err); info != nil {
		event["code"] = info["code"]
		event["message"] = info["message"]
	}
	peer.Emit(event)
	in.out.stop()
}

func (in *echoInbound) OnComplete() {
	if !in.completed {
		in.completed = true
		peer.Emit(map[string]any{"event": "channel_inbound_complete", "form": "frame"})
	}
	in.out.finish()
}
