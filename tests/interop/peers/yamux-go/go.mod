module rsocket-tx-interop/yamux-go-peer

go 1.22

require github.com/hashicorp/yamux v0.1.2
