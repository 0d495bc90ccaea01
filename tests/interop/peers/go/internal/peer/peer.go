// Package peer holds what the rsocket-go interop server and client share: the JSON output,
// the payload formats, the demo responder rules and the command-line helpers.  It mirrors
// ../../../common.js and ../../../py/peer_common.py (same command lines, same JSON); the
// formats are documented in tests/interop/peers/README.md.
package peer

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/rsocket/rsocket-go/core"
	"github.com/rsocket/rsocket-go/payload"
)

// Name is the peer name printed in client results (the key of peers.PEERS).
const Name = "rsocket-go-0.8.12"

// Exit codes of every program (README.md, "Exit codes").
const (
	ExitOK          = 0
	ExitRSocketErr  = 1
	ExitFailure     = 2
	ExitUnsupported = 3
)

// MaxRequestN is 2^31-1, the default credit.
const MaxRequestN = 2147483647

// MinFragment and MaxFragment are rsocket-go's bounds for Fragment(mtu)
// (internal/fragmentation: FrameHeaderLen + 4 and 2^24-1 - 3).
const (
	MinFragment = 10
	MaxFragment = 16777215 - 3
)

var outMu sync.Mutex

// Emit writes one JSON line to stdout (flushed: stdout is unbuffered in Go).
func Emit(obj map[string]any) {
	line, err := json.Marshal(obj)
	if err != nil {
		line = []byte(fmt.Sprintf(`{"failure": %q}`, err.Error()))
	}
	outMu.Lock()
	defer outMu.Unlock()
	_, _ = os.Stdout.Write(append(line, '\n'))
}

// Println writes a plain line (LISTENING) to stdout.
func Println(text string) {
	outMu.Lock()
	defer outMu.Unlock()
	_, _ = os.Stdout.WriteString(text + "\n")
}

// Finish prints obj (when not nil) and exits with code.
func Finish(code int, obj map[string]any) {
	if obj != nil {
		Emit(obj)
	}
	os.Exit(code)
}

// Fail exits with ExitFailure and {"failure": text}.
func Fail(format string, args ...any) {
	Finish(ExitFailure, map[string]any{"failure": fmt.Sprintf(format, args...)})
}

// Unsupported exits with ExitUnsupported and {"unsupported": reason}.
func Unsupported(reason string) {
	Finish(ExitUnsupported, map[string]any{"unsupported": reason})
}

// Pattern is what --data-size/--metadata-size send: byte i is i % 256.
func Pattern(n int) []byte {
	out := make([]byte, n)
	for i := range out {
		out[i] = byte(i % 256)
	}
	return out
}

// Payload is a received payload copied out of rsocket-go's pooled frame buffers.
// Metadata is nil when the frame had no M flag (HasMetadata false).
type Payload struct {
	Data        []byte
	Metadata    []byte
	HasMetadata bool
	// Flags of the frame the payload came in (for a reassembled payload: of its FIRST
	// fragment, which is what rsocket-go looks at), 0 when unknown.
	Flags core.FrameFlag
	// Type of that frame (PAYLOAD, REQUEST_CHANNEL...), 0 when unknown.
	Type core.FrameType
}

type headered interface {
	Header() core.FrameHeader
}

// Copy copies p's data and metadata (rsocket-go releases received frames to a pool after the
// callback returns) and, when p is a frame, its flags and type.
func Copy(p payload.Payload) Payload {
	out := Payload{Data: append([]byte{}, p.Data()...)}
	if m, ok := p.Metadata(); ok {
		out.Metadata = append([]byte{}, m...)
		out.HasMetadata = true
	}
	if h, ok := p.(headered); ok {
		out.Flags = h.Header().Flag()
		out.Type = h.Header().Type()
	}
	return out
}

// ToPayload is the rsocket-go payload sending data and metadata (rsocket-go sets M only for
// non-empty metadata, whatever is given here).
func (p Payload) ToPayload() payload.Payload {
	if !p.HasMetadata {
		return payload.New(p.Data, nil)
	}
	return payload.New(p.Data, p.Metadata)
}

// Describe is the JSON form of a payload; mode is "full", "digest" or "both".
func Describe(p Payload, mode string) map[string]any {
	out := map[string]any{}
	if mode != "digest" {
		out["data"] = base64.StdEncoding.EncodeToString(p.Data)
		if p.HasMetadata {
			out["metadata"] = base64.StdEncoding.EncodeToString(p.Metadata)
		} else {
			out["metadata"] = nil
		}
	}
	if mode != "full" {
		out["data_len"] = len(p.Data)
		out["data_sha256"] = sha(p.Data)
		if p.HasMetadata {
			out["metadata_len"] = len(p.Metadata)
			out["metadata_sha256"] = sha(p.Metadata)
		} else {
			out["metadata_len"] = nil
			out["metadata_sha256"] = nil
		}
	}
	return out
}

func sha(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// Event emits a server event: name, the extra fields and the payload in "both" form.
func Event(name string, p *Payload, extra map[string]any) {
	obj := map[string]any{"event": name}
	for k, v := range extra {
		obj[k] = v
	}
	if p != nil {
		for k, v := range Describe(*p, "both") {
			obj[k] = v
		}
	}
	Emit(obj)
}

// ErrorRequested is the application error message when data starts with "error:".
func ErrorRequested(data []byte) (string, bool) {
	if strings.HasPrefix(string(data), "error:") {
		return string(data[len("error:"):]), true
	}
	return "", false
}

// StreamCount is the request-stream count: decimal data, 10 when empty.
func StreamCount(data []byte) (int, error) {
	text := string(data)
	if text == "" {
		return 10, nil
	}
	for _, c := range text {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("request-stream data must be a decimal count, got %s", pyRepr(text))
		}
	}
	n, err := strconv.Atoi(text)
	if err != nil {
		return 0, fmt.Errorf("request-stream data must be a decimal count, got %s", pyRepr(text))
	}
	return n, nil
}

// pyRepr quotes like Python's repr() of a str for the simple cases (the message the py and js
// peers produce).
func pyRepr(s string) string {
	if strings.Contains(s, "'") && !strings.Contains(s, `"`) {
		return `"` + s + `"`
	}
	return "'" + strings.ReplaceAll(s, "'", `\'`) + "'"
}

// ErrorInfo is {"code", "message"} of an RSocket ERROR reported by rsocket-go (a
// core.CustomError), or nil for any other error.
func ErrorInfo(err error) map[string]any {
	var custom core.CustomError
	if errors.As(err, &custom) {
		return map[string]any{"code": int(custom.ErrorCode()), "message": string(custom.ErrorData())}
	}
	return nil
}

// Flags is a flag.FlagSet that fails with a usage error instead of printing.
type Flags struct {
	*flag.FlagSet
	set map[string]bool
}

// NewFlags is an empty flag set named name.
func NewFlags(name string) *Flags {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return &Flags{FlagSet: fs}
}

// Parse parses args (Go's flag package accepts --name value), exiting with a usage failure.
func (f *Flags) Parse(args []string) {
	if err := f.FlagSet.Parse(args); err != nil {
		Fail("usage: %s", err)
	}
	if f.NArg() > 0 {
		Fail("usage: unexpected argument %q", f.Arg(0))
	}
	f.set = map[string]bool{}
	f.Visit(func(fl *flag.Flag) { f.set[fl.Name] = true })
}

// Given says whether the flag name was on the command line.
func (f *Flags) Given(name string) bool {
	return f.set[name]
}

// Transport options shared by both programs.
type Transport struct {
	Kind string
	Path string
	Host string
}

// AddTransport declares --transport tcp|ws, --path and --host.
func (f *Flags) AddTransport() *Transport {
	t := &Transport{}
	f.StringVar(&t.Kind, "transport", "tcp", "tcp or ws")
	f.StringVar(&t.Path, "path", "/", "WebSocket URL path")
	f.StringVar(&t.Host, "host", "127.0.0.1", "host")
	return t
}

// Check validates the transport options.
func (t *Transport) Check() {
	if t.Kind != "tcp" && t.Kind != "ws" {
		Fail("usage: --transport must be tcp or ws, got %q", t.Kind)
	}
	if !strings.HasPrefix(t.Path, "/") {
		t.Path = "/" + t.Path
	}
}
