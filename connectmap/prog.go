package connectmap

// The programs, as instructions, and the maps' layouts.
//
// ports: key   addr[4] port[2] pad[2]          (network order)
//        value addr[4] count u32 ports[16][2] next u32
//              (addr and ports network order; next counts the
//              connections taken, for a group's turn)
// peers: key   the socket's cookie, u64
//        value dialled addr[4] port[2] pad[2], went to addr[4] port[2] pad[2]
//
// Both programs return 1, always: they never refuse a connection, only
// rewrite it; what the kernel would refuse (nftables' guards, declared
// reach) it refuses at the address the connection goes to.

import (
	"encoding/binary"
	"net/netip"

	"github.com/cilium/ebpf/asm"
	"golang.org/x/sys/unix"
)

const (
	keySize    = 8
	targetSize = valueNext + 4
	peerSize   = 16
	// maxKeys bounds the published ports of one daemon.
	maxKeys = 4096
	// maxPeers is how many connections' dialled addresses are kept for
	// getpeername; past it the oldest are forgotten, and such a socket
	// sees the network's address as its peer.
	maxPeers = 16384
)

// Offsets in struct bpf_sock_addr and struct bpf_sock (linux/bpf.h).
const (
	ctxUserIP4   = 4
	ctxUserPort  = 24
	ctxProtocol  = 36
	ctxSk        = 64
	skBoundDev   = 0
	skSrcIP4     = 24
	stackKey     = -8  // the ports key, then the peers key (the cookie)
	stackPeer    = -24 // the peers value
	stackCookie  = -32
	valueCount   = 4
	valuePorts   = 8
	valueNext    = valuePorts + 2*MaxPorts
	peerDialled  = 0
	peerWentAddr = 8
	peerWentPort = 12
)

func keyOf(ap netip.AddrPort) [keySize]byte {
	var k [keySize]byte
	a := ap.Addr().As4()
	copy(k[:4], a[:])
	binary.BigEndian.PutUint16(k[4:6], ap.Port())
	return k
}

func parseKey(k [keySize]byte) netip.AddrPort {
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte(k[:4])), binary.BigEndian.Uint16(k[4:6]))
}

func valueOf(t Target) [targetSize]byte {
	var v [targetSize]byte
	a := t.Addr.As4()
	copy(v[:4], a[:])
	binary.NativeEndian.PutUint32(v[valueCount:], uint32(len(t.Ports)))
	for i, p := range t.Ports {
		binary.BigEndian.PutUint16(v[valuePorts+2*i:], p)
	}
	return v
}

func parseValue(v [targetSize]byte) Target {
	t := Target{Addr: netip.AddrFrom4([4]byte(v[:4]))}
	n := min(int(binary.NativeEndian.Uint32(v[valueCount:])), MaxPorts)
	for i := range n {
		t.Ports = append(t.Ports, binary.BigEndian.Uint16(v[valuePorts+2*i:]))
	}
	return t
}

// connect4 rewrites a TCP connect() made in the network namespace netns,
// by a socket bound to no address and no device, to an address and port
// of ports: to its target's address, at its one port or at the next of
// its ports in turn (a counter in the entry, taken with an atomic
// fetch-and-add, Linux 5.12, modulo their number). It records, by the socket's cookie, what was
// dialled and where it went, for getpeername4.
//
// A bound socket is left to nftables: its source, 127.0.0.1 say, cannot
// leave through a network's link, where NAT would have changed it.
func connect4(ports, peers int, netns uint64) asm.Instructions {
	const out = "out"
	return asm.Instructions{
		asm.Mov.Reg(asm.R6, asm.R1),
		asm.LoadMem(asm.R2, asm.R6, ctxProtocol, asm.Word),
		asm.JNE.Imm(asm.R2, unix.IPPROTO_TCP, out),
		asm.LoadMem(asm.R2, asm.R6, ctxSk, asm.DWord),
		asm.LoadMem(asm.R3, asm.R2, skSrcIP4, asm.Word),
		asm.JNE.Imm(asm.R3, 0, out),
		asm.LoadMem(asm.R3, asm.R2, skBoundDev, asm.Word),
		asm.JNE.Imm(asm.R3, 0, out),
		// The daemon's namespace alone: 127.0.0.1 in a network's is that
		// network's own loopback.
		asm.Mov.Reg(asm.R1, asm.R6),
		asm.FnGetNetnsCookie.Call(),
		asm.LoadImm(asm.R1, int64(netns), asm.DWord),
		asm.JNE.Reg(asm.R0, asm.R1, out),
		// The key: the address and port dialled, as the socket holds them.
		asm.LoadMem(asm.R2, asm.R6, ctxUserIP4, asm.Word),
		asm.StoreMem(asm.RFP, stackKey, asm.R2, asm.Word),
		asm.LoadMem(asm.R2, asm.R6, ctxUserPort, asm.Word),
		asm.StoreMem(asm.RFP, stackKey+4, asm.R2, asm.Half),
		asm.StoreImm(asm.RFP, stackKey+6, 0, asm.Half),
		asm.LoadMapPtr(asm.R1, ports),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, stackKey),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, out),
		asm.Mov.Reg(asm.R7, asm.R0),
		// The port: the one, or the next of count in turn.
		asm.Mov.Imm(asm.R8, 0),
		asm.LoadMem(asm.R9, asm.R7, valueCount, asm.Word),
		asm.JLE.Imm(asm.R9, 1, "chosen"),
		asm.Mov.Imm(asm.R8, 1),
		fetchAdd(asm.R7, valueNext, asm.R8),
		asm.Mod.Reg(asm.R8, asm.R9),
		asm.And.Imm(asm.R8, MaxPorts-1).WithSymbol("chosen"),
		asm.LSh.Imm(asm.R8, 1),
		asm.Add.Reg(asm.R8, asm.R7),
		asm.LoadMem(asm.R8, asm.R8, valuePorts, asm.Half),
		// What was dialled and where it goes, by the socket's cookie.
		asm.LoadMem(asm.R2, asm.RFP, stackKey, asm.DWord),
		asm.StoreMem(asm.RFP, stackPeer+peerDialled, asm.R2, asm.DWord),
		asm.LoadMem(asm.R2, asm.R7, 0, asm.Word),
		asm.StoreMem(asm.RFP, stackPeer+peerWentAddr, asm.R2, asm.Word),
		asm.StoreMem(asm.RFP, stackPeer+peerWentPort, asm.R8, asm.Half),
		asm.StoreImm(asm.RFP, stackPeer+peerWentPort+2, 0, asm.Half),
		asm.Mov.Reg(asm.R1, asm.R6),
		asm.FnGetSocketCookie.Call(),
		asm.StoreMem(asm.RFP, stackCookie, asm.R0, asm.DWord),
		asm.LoadMapPtr(asm.R1, peers),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, stackCookie),
		asm.Mov.Reg(asm.R3, asm.RFP),
		asm.Add.Imm(asm.R3, stackPeer),
		asm.Mov.Imm(asm.R4, 0), // BPF_ANY
		asm.FnMapUpdateElem.Call(),
		// The rewrite.
		asm.LoadMem(asm.R2, asm.R7, 0, asm.Word),
		asm.StoreMem(asm.R6, ctxUserIP4, asm.R2, asm.Word),
		asm.StoreMem(asm.R6, ctxUserPort, asm.R8, asm.Word),
		asm.Mov.Imm(asm.R0, 1).WithSymbol(out),
		asm.Return(),
	}
}

// getpeername4 gives a socket that connect4 rewrote the address it
// dialled as its peer, while its peer is still where connect4 sent it.
func getpeername4(peers int) asm.Instructions {
	const out = "out"
	return asm.Instructions{
		asm.Mov.Reg(asm.R6, asm.R1),
		asm.FnGetSocketCookie.Call(),
		asm.StoreMem(asm.RFP, stackKey, asm.R0, asm.DWord),
		asm.LoadMapPtr(asm.R1, peers),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, stackKey),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, out),
		asm.LoadMem(asm.R2, asm.R6, ctxUserIP4, asm.Word),
		asm.LoadMem(asm.R3, asm.R0, peerWentAddr, asm.Word),
		asm.JNE.Reg(asm.R2, asm.R3, out),
		asm.LoadMem(asm.R2, asm.R6, ctxUserPort, asm.Word),
		asm.LoadMem(asm.R3, asm.R0, peerWentPort, asm.Half),
		asm.JNE.Reg(asm.R2, asm.R3, out),
		asm.LoadMem(asm.R2, asm.R0, peerDialled, asm.Word),
		asm.StoreMem(asm.R6, ctxUserIP4, asm.R2, asm.Word),
		asm.LoadMem(asm.R2, asm.R0, peerDialled+4, asm.Half),
		asm.StoreMem(asm.R6, ctxUserPort, asm.R2, asm.Word),
		asm.Mov.Imm(asm.R0, 1).WithSymbol(out),
		asm.Return(),
	}
}

// fetchAdd adds src to the word at dst+offset atomically and leaves its
// value before in src (BPF_ATOMIC with BPF_ADD | BPF_FETCH).
func fetchAdd(dst asm.Register, offset int16, src asm.Register) asm.Instruction {
	ins := asm.StoreXAdd(dst, src, asm.Word)
	ins.Offset = offset
	ins.Constant = 0x01 // BPF_FETCH
	return ins
}
