use std::io::{ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Instant;
use polling::{Event, PollMode, Poller};

fn pair() -> (TcpStream, TcpStream) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let (s, _) = l.accept().unwrap();
    c.set_nodelay(true).unwrap();
    s.set_nodelay(true).unwrap();
    c.set_nonblocking(true).unwrap();
    s.set_nonblocking(true).unwrap();
    (c, s)
}
fn wr(s: &mut TcpStream, b: &[u8]) { let mut b = b; while !b.is_empty() { match s.write(b) { Ok(n) => b = &b[n..], Err(e) if e.kind()==ErrorKind::WouldBlock => {}, Err(e) => panic!("{e}") } } }
fn rd(s: &mut TcpStream, b: &mut [u8], extra: Option<&mut TcpStream>, yld: bool) -> bool {
    let mut extra = extra;
    let mut b = b;
    while !b.is_empty() {
        if let Some(x) = extra.as_deref_mut() { let mut t=[0u8;64]; match x.read(&mut t) { Ok(0) => return false, _ => {} } }
        match s.read(b) { Ok(0) => return false, Ok(n) => { let t = b; b = &mut t[n..]; }, Err(e) if e.kind()==ErrorKind::WouldBlock => { if yld { std::thread::yield_now(); } }, Err(_) => return false }
    }
    true
}
fn main() {
    let args: Vec<String> = std::env::args().collect();
    let mode = args[1].clone();
    let len: usize = args.get(2).map(|s| s.parse().unwrap()).unwrap_or(8);
    let epoll = mode.contains('e');
    let two = mode.contains('2');
    let yld = mode.contains('y');
    let (mut c, mut s) = pair();
    let (mut c2, mut s2) = pair();
    let pc = Poller::new().unwrap(); let ps = Poller::new().unwrap();
    if epoll { unsafe {
        pc.add_with_mode(&c, Event::readable(0), PollMode::Level).unwrap();
        ps.add_with_mode(&s, Event::readable(0), PollMode::Level).unwrap();
        pc.add_with_mode(&c2, Event::readable(0), PollMode::Level).unwrap();
        ps.add_with_mode(&s2, Event::readable(0), PollMode::Level).unwrap();
    } }
    let n = 200_000u64;
    let h = std::thread::spawn(move || { let mut m = vec![0u8; len]; let _k = (&ps, &mut s2);
        loop { if !rd(&mut s, &mut m, if two { Some(&mut s2) } else { None }, yld) { break; } wr(&mut s, &m); } });
    let mut m = vec![1u8; len];
    for round in 0..5 {
        let t = Instant::now();
        for _ in 0..n { wr(&mut c, &m); rd(&mut c, &mut m, if two { Some(&mut c2) } else { None }, yld); }
        let el = t.elapsed();
        if round > 0 { println!("{mode} {:.3} us", el.as_secs_f64() * 1e6 / n as f64); }
    }
    drop(pc); c.shutdown(std::net::Shutdown::Both).unwrap(); drop(c2); h.join().unwrap();
}
