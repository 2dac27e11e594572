//go:build ignore

// tlsfwd is the measurement behind the README's decision on TLS for the
// binary protocol: what a TLS listener beside gnet would do, as a separate
// process. It terminates TLS on -listen with -cert/-key and forwards each
// connection's bytes to -to (Regent's binary-protocol port) and back, one
// goroutine per direction (-plain: the same without TLS, to tell the extra
// hop's cost from the cipher's). It is not shipped.
//
//	go run docs/security/tlsfwd.go -listen 127.0.0.1:7633 -to 127.0.0.1:6633 -cert cert.pem -key key.pem
package main

import (
	"crypto/tls"
	"flag"
	"io"
	"log/slog"
	"net"
	"os"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:7633", "TLS address to listen on")
	to := flag.String("to", "127.0.0.1:6633", "Regent's binary-protocol address")
	cert := flag.String("cert", "cert.pem", "certificate chain (PEM)")
	key := flag.String("key", "key.pem", "private key (PEM)")
	plain := flag.Bool("plain", false, "forward without TLS (the cost of the extra hop alone)")
	flag.Parse()
	var l net.Listener
	var err error
	if *plain {
		l, err = net.Listen("tcp", *listen)
	} else {
		pair, perr := tls.LoadX509KeyPair(*cert, *key)
		if perr != nil {
			slog.Error("certificate", "err", perr)
			os.Exit(1)
		}
		l, err = tls.Listen("tcp", *listen, &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12})
	}
	if err != nil {
		slog.Error("listen", "err", err)
		os.Exit(1)
	}
	for {
		c, err := l.Accept()
		if err != nil {
			slog.Error("accept", "err", err)
			continue
		}
		go func() {
			defer c.Close()
			b, err := net.Dial("tcp", *to)
			if err != nil {
				return
			}
			defer b.Close()
			b.(*net.TCPConn).SetNoDelay(true)
			go func() { io.Copy(b, c); b.(*net.TCPConn).CloseWrite() }()
			io.Copy(c, b)
		}()
	}
}
