use std::io::{ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
static BLKM: std::sync::OnceLock<bool> = std::sync::OnceLock::new(); static VECM: std::sync::OnceLock<bool> = std::sync::OnceLock::new(); static SENDM: std::sync::OnceLock<bool> = std::sync::OnceLock::new(); static YM: std::sync::OnceLock<bool> = std::sync::OnceLock::new(); static BM: std::sync::OnceLock<bool> = std::sync::OnceLock::new(); static FLM: std::sync::OnceLock<i32> = std::sync::OnceLock::new();
fn tsc() -> u64 { unsafe { core::arch::x86_64::_rdtsc() } }
fn pair() -> (TcpStream, TcpStream) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let (s, _) = l.accept().unwrap();
    let blk = std::env::var_os("BLK").is_some();
    for x in [&c, &s] { x.set_nodelay(true).unwrap(); if !blk { x.set_nonblocking(true).unwrap(); }
        if std::env::var_os("KA").is_some() { let params = socket2::TcpKeepalive::new().with_time(std::time::Duration::from_secs(30)).with_interval(std::time::Duration::from_secs(7)).with_retries(4); socket2::SockRef::from(x).set_tcp_keepalive(&params).unwrap(); } }
    (c, s)
}
// returns (send start, send end)
fn wr(s: &mut TcpStream, b: &[u8]) -> (u64, u64) { let a = tsc(); let mut b = b; let vec = *VECM.get_or_init(|| std::env::var_os("VEC").is_some()); while !b.is_empty() { let snd = *SENDM.get_or_init(|| std::env::var_os("SEND").is_some()); let fl: i32 = *FLM.get_or_init(|| std::env::var("FL").ok().map(|v| v.parse().unwrap()).unwrap_or(libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL)); let r = if snd { socket2::SockRef::from(&*s).send_with_flags(b, fl) } else if vec { socket2::SockRef::from(&*s).send_vectored_with_flags(&[std::io::IoSlice::new(b)], libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL) } else { s.write(b) }; match r { Ok(n) => b = &b[n..], Err(e) if e.kind()==ErrorKind::WouldBlock => {}, Err(e) => panic!("{e}") } } (a, tsc()) }
fn rd(s: &mut TcpStream, b: &mut [u8]) -> Option<u64> { let yl = *YM.get_or_init(|| std::env::var_os("YIELD").is_some()); thread_local! { static BIGBUF: std::cell::RefCell<Vec<u8>> = std::cell::RefCell::new(vec![0u8; 65536]); } let bigmode = *BM.get_or_init(|| std::env::var_os("BIG").is_some()); BIGBUF.with(|big| { let mut big = big.borrow_mut(); let big: &mut [u8] = if bigmode { &mut big[..] } else { &mut big[..b.len()] }; let mut got = 0; while got < b.len() { let want = if big.len() > b.len() { big.len() } else { b.len() - got }; let rr = if *BLKM.get_or_init(|| std::env::var_os("BLK").is_some()) { let r = unsafe { libc::recv(std::os::fd::AsRawFd::as_raw_fd(&*s), big.as_mut_ptr().cast(), want, libc::MSG_DONTWAIT) }; if r < 0 { Err(std::io::Error::last_os_error()) } else { Ok(r as usize) } } else { s.read(&mut big[..want]) }; match rr { Ok(0) => return None, Ok(n) => { let n = n.min(b.len() - got); b[got..got+n].copy_from_slice(&big[..n]); got += n }, Err(e) if e.kind()==ErrorKind::WouldBlock => { if yl { std::thread::yield_now(); } }, Err(_) => return None } } Some(tsc()) }) }
fn med(mut v: Vec<i64>) -> f64 { v.sort(); v[v.len()/2] as f64 / 2.6 }
fn main() {
    let len: usize = std::env::args().nth(1).map(|s| s.parse().unwrap()).unwrap_or(8);
    let n = 200_000usize;
    let (mut c, mut s) = pair();
    let log = Arc::new(Mutex::new(Vec::new()));
    let l2 = Arc::clone(&log);
    let h = std::thread::spawn(move || { let mut m = vec![0u8; len]; let mut v = Vec::with_capacity(n);
        let work: usize = std::env::var("WORK").ok().map(|v| v.parse().unwrap()).unwrap_or(0); let mut junk = vec![0u64; work / 8 + 1]; let mut acc = 0u64;
        while let Some(found) = rd(&mut s, &mut m) { for (i, x) in junk.iter_mut().enumerate().step_by(8) { *x = x.wrapping_add(i as u64 ^ acc); acc = acc.wrapping_add(*x); } std::hint::black_box(acc); let (a, b) = wr(&mut s, &m); v.push((found, a, b)); } *l2.lock().unwrap() = v; });
    let mut m = vec![1u8; len];
    let mut v = Vec::with_capacity(n);
    let t0 = std::time::Instant::now();
    for _ in 0..n { let (a, b) = wr(&mut c, &m); let f = rd(&mut c, &mut m).unwrap(); v.push((a, b, f)); }
    let el = t0.elapsed();
    c.shutdown(std::net::Shutdown::Both).unwrap(); h.join().unwrap();
    let sv = log.lock().unwrap().clone();
    let k = n / 10;
    let rt: Vec<i64> = v[k..].iter().map(|x| (x.2 - x.0) as i64).collect();
    let csend: Vec<i64> = v[k..].iter().map(|x| (x.1 - x.0) as i64).collect();
    let ssend: Vec<i64> = sv[k..].iter().map(|x| (x.2 - x.1) as i64).collect();
    let c2s: Vec<i64> = (k..n).map(|i| sv[i].0 as i64 - v[i].1 as i64).collect();
    let s2c: Vec<i64> = (k..n).map(|i| v[i].2 as i64 - sv[i].2 as i64).collect();
    let c2s_start: Vec<i64> = (k..n).map(|i| sv[i].0 as i64 - v[i].0 as i64).collect();
    println!("len {len}: mean rt {:.2} us; median rt {:.0} ns, client send {:.0}, server send {:.0}, client send end -> server found {:.0}, server send end -> client found {:.0}, client send start -> server found {:.0}",
        el.as_secs_f64()*1e6/n as f64, med(rt), med(csend), med(ssend), med(c2s), med(s2c), med(c2s_start));
}
