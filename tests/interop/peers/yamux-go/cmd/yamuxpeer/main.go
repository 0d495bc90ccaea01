// yamuxpeer: the hashicorp/yamux interop peer of rsocket_tx (tests/interop/test_yamux_interop.py).
//
//	yamuxpeer server [-backlog N]       listen on 127.0.0.1:0, print "listening PORT"
//	yamuxpeer client ADDR SCENARIO...   connect to ADDR, run the scenarios, print "ok NAME"
//	                                    or "FAIL NAME: why" for each, exit 1 on any failure
//
// Every stream begins with a command line; both sides (this peer and rsocket_tx's test
// server) answer the same commands:
//
//	echo            copy the stream back until its FIN, then FIN
//	source N        send N bytes of the pattern (byte i = i mod 251), then FIN
//	sink            read until FIN, answer "got N SHA256HEX\n", then FIN
//	ping            ping the session's peer, answer "pong\n", FIN
//	goaway          send Go Away (normal), answer "ok\n", FIN
//	stall           stop accepting streams (the backlog fills, then SYNs get RST), "stalled\n"
//	wait-reset      print "waiting ID", read until the stream fails; print "reset ID" on a
//	                reset (stdout)
//	reset           reset the stream (RST) (rsocket_tx only: hashicorp/yamux has no RST API)
//	open            open a stream to the peer: "echo\n" + 100,000 bytes, FIN, check the echo,
//	                answer "opened ok\n" or "opened FAIL why\n"
package main

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/hashicorp/yamux"
)

var out sync.Mutex

func say(format string, args ...any) {
	out.Lock()
	defer out.Unlock()
	fmt.Printf(format+"\n", args...)
}

func pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i % 251)
	}
	return b
}

func config(backlog int) *yamux.Config {
	c := yamux.DefaultConfig()
	c.AcceptBacklog = backlog
	c.LogOutput = os.Stderr
	return c
}

// serveStream answers one stream's command.
// It tells read (true for "stall") once it has the command line: the accept loop takes the
// next stream only then, so that after "stall" no stream is accepted any more.
func serveStream(session *yamux.Session, stream *yamux.Stream, read chan bool) {
	defer stream.Close()
	reader := bufio.NewReader(stream)
	line, err := reader.ReadString('\n')
	fields := strings.Fields(line)
	read <- len(fields) > 0 && fields[0] == "stall"
	if err != nil || len(fields) == 0 {
		say("error %d reading the command: %v", stream.StreamID(), err)
		return
	}
	switch fields[0] {
	case "echo":
		if _, err := io.Copy(stream, reader); err != nil {
			say("error %d echo: %v", stream.StreamID(), err)
		}
	case "source":
		n, _ := strconv.Atoi(fields[1])
		if _, err := stream.Write(pattern(n)); err != nil {
			say("error %d source: %v", stream.StreamID(), err)
		}
	case "sink":
		h := sha256.New()
		n, err := io.Copy(h, reader)
		if err != nil {
			say("error %d sink: %v", stream.StreamID(), err)
			return
		}
		fmt.Fprintf(stream, "got %d %s\n", n, hex.EncodeToString(h.Sum(nil)))
	case "ping":
		if _, err := session.Ping(); err != nil {
			fmt.Fprintf(stream, "ping failed %v\n", err)
			return
		}
		fmt.Fprintf(stream, "pong\n")
	case "goaway":
		if err := session.GoAway(); err != nil {
			fmt.Fprintf(stream, "goaway failed %v\n", err)
			return
		}
		fmt.Fprintf(stream, "ok\n")
	case "stall":
		fmt.Fprintf(stream, "stalled\n")
	case "wait-reset":
		say("waiting %d", stream.StreamID()) // (the command is read: a reset now is seen)
		_, err := io.Copy(io.Discard, reader)
		if errors.Is(err, yamux.ErrConnectionReset) {
			say("reset %d", stream.StreamID())
		} else {
			say("not reset %d: %v", stream.StreamID(), err)
		}
	case "open":
		if err := openAndCheck(session); err != nil {
			fmt.Fprintf(stream, "opened FAIL %v\n", err)
			return
		}
		fmt.Fprintf(stream, "opened ok\n")
	default:
		fmt.Fprintf(stream, "unknown command %q\n", fields[0])
	}
}

// openAndCheck opens a stream to the peer, has it echo 100,000 bytes and checks them.
func openAndCheck(session *yamux.Session) error {
	stream, err := session.OpenStream()
	if err != nil {
		return err
	}
	data := pattern(100000)
	go func() {
		stream.Write([]byte("echo\n"))
		stream.Write(data)
		stream.Close()
	}()
	got, err := io.ReadAll(stream)
	if err != nil {
		return err
	}
	if !bytes.Equal(got, data) {
		return fmt.Errorf("echo of %d bytes differs", len(got))
	}
	return nil
}

func accept(session *yamux.Session) {
	read := make(chan bool)
	for {
		stream, err := session.AcceptStream()
		if err != nil {
			return
		}
		go serveStream(session, stream, read)
		if <-read {
			<-session.CloseChan()
			return
		}
	}
}

func server(args []string) {
	flags := flag.NewFlagSet("server", flag.ExitOnError)
	backlog := flags.Int("backlog", 256, "AcceptBacklog")
	flags.Parse(args)
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	say("listening %d", listener.Addr().(*net.TCPAddr).Port)
	for {
		conn, err := listener.Accept()
		if err != nil {
			return
		}
		go func() {
			session, err := yamux.Server(conn, config(*backlog))
			if err != nil {
				say("error session: %v", err)
				return
			}
			say("session")
			accept(session)
			<-session.CloseChan()
			say("session closed")
		}()
	}
}

// command opens a stream, sends line (and body), half-closes, and returns what comes back.
func command(session *yamux.Session, line string, body []byte) ([]byte, error) {
	stream, err := session.OpenStream()
	if err != nil {
		return nil, err
	}
	errs := make(chan error, 1)
	go func() {
		if _, err := stream.Write(append([]byte(line+"\n"), body...)); err != nil {
			errs <- err
			return
		}
		errs <- stream.Close()
	}()
	got, err := io.ReadAll(stream)
	if err != nil {
		return got, err
	}
	return got, <-errs
}

func digest(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

func scenario(session *yamux.Session, name string) error {
	switch name {
	case "streams":
		// 200 streams at once, each echoing its own bytes
		var wg sync.WaitGroup
		errs := make(chan error, 200)
		for i := 0; i < 200; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				data := bytes.Repeat([]byte{byte(i)}, 1000+i*37)
				got, err := command(session, "echo", data)
				if err == nil && !bytes.Equal(got, data) {
					err = fmt.Errorf("stream %d: echo of %d bytes differs", i, len(got))
				}
				errs <- err
			}(i)
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				return err
			}
		}
		return nil
	case "sink":
		data := pattern(10 << 20)
		got, err := command(session, "sink", data)
		if err != nil {
			return err
		}
		want := fmt.Sprintf("got %d %s\n", len(data), digest(data))
		if string(got) != want {
			return fmt.Errorf("answer %q, want %q", got, want)
		}
		return nil
	case "source":
		got, err := command(session, fmt.Sprintf("source %d", 10<<20), nil)
		if err != nil {
			return err
		}
		if !bytes.Equal(got, pattern(10<<20)) {
			return fmt.Errorf("%d bytes received, not the pattern's %d", len(got), 10<<20)
		}
		return nil
	case "echo-big":
		data := pattern(10 << 20)
		got, err := command(session, "echo", data)
		if err != nil {
			return err
		}
		if !bytes.Equal(got, data) {
			return fmt.Errorf("echo of %d bytes differs", len(got))
		}
		return nil
	case "ping":
		_, err := session.Ping()
		return err
	case "serverping", "open":
		got, err := command(session, map[string]string{"serverping": "ping", "open": "open"}[name], nil)
		want := map[string]string{"serverping": "pong\n", "open": "opened ok\n"}[name]
		if err == nil && string(got) != want {
			err = fmt.Errorf("answer %q", got)
		}
		return err
	case "reset":
		stream, err := session.OpenStream()
		if err != nil {
			return err
		}
		stream.Write([]byte("reset\n"))
		_, err = io.ReadAll(stream)
		if !errors.Is(err, yamux.ErrConnectionReset) {
			return fmt.Errorf("read ended with %v, not a reset", err)
		}
		return nil
	case "goaway":
		got, err := command(session, "goaway", nil)
		if err != nil {
			return err
		}
		if string(got) != "ok\n" {
			return fmt.Errorf("answer %q", got)
		}
		if _, err := session.OpenStream(); !errors.Is(err, yamux.ErrRemoteGoAway) {
			return fmt.Errorf("a stream opened after Go Away: %v", err)
		}
		return nil
	}
	return fmt.Errorf("unknown scenario %q", name)
}

func client(args []string) {
	conn, err := net.Dial("tcp", args[0])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	session, err := yamux.Client(conn, config(256))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	go accept(session) // streams the server opens ("open")
	failed := false
	for _, name := range args[1:] {
		if err := scenario(session, name); err != nil {
			say("FAIL %s: %v", name, err)
			failed = true
		} else {
			say("ok %s", name)
		}
	}
	session.Close()
	if failed {
		os.Exit(1)
	}
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: yamuxpeer server [-backlog N] | client ADDR SCENARIO...")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "server":
		server(os.Args[2:])
	case "client":
		client(os.Args[2:])
	default:
		fmt.Fprintln(os.Stderr, "unknown mode", os.Args[1])
		os.Exit(2)
	}
}
