//! `MpmcQueue` under every interleaving loom explores: no item lost or
//! duplicated, FIFO order, `Full` only when full, `None` only when empty.

use ::loom::sync::Arc;
use ::loom::sync::atomic::{AtomicBool, Ordering};
use ::loom::thread;
use dinah_core::{ArrayMpmcQueue, MpmcSlot};

/// Pops, yielding to the model's scheduler while the queue is empty.
fn pop_waiting<const N: usize>(queue: &ArrayMpmcQueue<u32, N>) -> u32 {
    loop {
        if let Some(item) = queue.pop() {
            return item;
        }
        thread::yield_now();
    }
}

/// Pushes, yielding to the model's scheduler while the queue is full.
///
/// loom explores every schedule, fair or not: a model in which two threads
/// can wait at the same time for a third lets them take turns forever. The
/// models below therefore have at most one waiting thread at a time.
fn push_waiting<const N: usize>(queue: &ArrayMpmcQueue<u32, N>, mut item: u32) {
    while let Err(error) = queue.try_push(item) {
        item = error.into_inner();
        thread::yield_now();
    }
}

/// One producer, one consumer, capacity `N`. The producer fills the queue,
/// then pushes one more; the consumer pops everything. A push that starts
/// after the consumer acknowledged a pop must succeed, and a pop that
/// starts after the producer announced a push must find an item: the queue
/// may report `Full` or `None` only for a state it was really in.
fn push_pop_race<const N: usize>() {
    ::loom::model(|| {
        let queue = Arc::new(ArrayMpmcQueue::<u32, N>::new());
        let announced = Arc::new(AtomicBool::new(false));
        let acked = Arc::new(AtomicBool::new(false));
        let consumer = {
            let (queue, announced, acked) = (
                Arc::clone(&queue),
                Arc::clone(&announced),
                Arc::clone(&acked),
            );
            thread::spawn(move || {
                let was_announced = announced.load(Ordering::Acquire);
                let first = match queue.pop() {
                    Some(item) => item,
                    None => {
                        assert!(!was_announced, "None after a push was announced");
                        pop_waiting(&queue)
                    }
                };
                acked.store(true, Ordering::Release);
                let mut items = vec![first];
                while items.len() < N + 1 {
                    items.push(pop_waiting(&queue));
                }
                items
            })
        };
        for item in 0..N as u32 {
            queue
                .try_push(item)
                .expect("the only producer never overfills");
            announced.store(true, Ordering::Release);
        }
        let was_acked = acked.load(Ordering::Acquire);
        if let Err(error) = queue.try_push(N as u32) {
            assert!(!was_acked, "Full after an item was popped");
            push_waiting(&queue, error.into_inner());
        }
        let items = consumer.join().expect("consumer panicked");
        assert_eq!(items, (0..=N as u32).collect::<Vec<_>>());
        assert!(queue.is_empty());
    });
}

#[test]
fn push_pop_race_capacity_1() {
    push_pop_race::<1>();
}

#[test]
fn push_pop_race_capacity_2() {
    push_pop_race::<2>();
}

/// heapless issue 583's scenario at capacity two: the queue starts full
/// and two threads each pop an item and push it straight back. Each thread
/// holds at most one item, so its pop finds one and its push finds room,
/// even when its push needs the slot the other thread's pop is still
/// releasing.
#[test]
fn pop_then_push_back_capacity_2() {
    ::loom::model(|| {
        let queue = Arc::new(ArrayMpmcQueue::<u32, 2>::new());
        queue.try_push(10).expect("room");
        queue.try_push(20).expect("room");
        let other = {
            let queue = Arc::clone(&queue);
            thread::spawn(move || {
                let item = queue.pop().expect("at most one item is held elsewhere");
                queue
                    .try_push(item)
                    .expect("the popped item's room is there");
            })
        };
        let item = queue.pop().expect("at most one item is held elsewhere");
        queue
            .try_push(item)
            .expect("the popped item's room is there");
        other.join().expect("other thread panicked");
        let mut items = [queue.pop(), queue.pop(), queue.pop()];
        items.sort();
        assert_eq!(items, [None, Some(10), Some(20)]);
    });
}

/// The same at capacity one: the other thread may find the queue empty
/// (its pop raced with ours), but a thread holding the item always finds
/// room for it.
#[test]
fn pop_then_push_back_capacity_1() {
    ::loom::model(|| {
        let queue = Arc::new(ArrayMpmcQueue::<u32, 1>::new());
        queue.try_push(10).expect("room");
        let other = {
            let queue = Arc::clone(&queue);
            thread::spawn(move || {
                if let Some(item) = queue.pop() {
                    queue
                        .try_push(item)
                        .expect("the popped item's room is there");
                }
            })
        };
        if let Some(item) = queue.pop() {
            queue
                .try_push(item)
                .expect("the popped item's room is there");
        }
        other.join().expect("other thread panicked");
        assert_eq!(queue.pop(), Some(10));
        assert_eq!(queue.pop(), None);
    });
}

/// Two producers, one consumer, capacity two: both pushes fit, the
/// consumer receives each item exactly once, and `len` never exceeds the
/// capacity meanwhile.
#[test]
fn two_producers_one_consumer_capacity_2() {
    ::loom::model(|| {
        let queue = Arc::new(ArrayMpmcQueue::<u32, 2>::new());
        let producers: Vec<_> = [1, 2]
            .into_iter()
            .map(|item| {
                let queue = Arc::clone(&queue);
                thread::spawn(move || queue.try_push(item).expect("two items fit"))
            })
            .collect();
        assert!(queue.len() <= 2);
        let mut items = [pop_waiting(&queue), pop_waiting(&queue)];
        for producer in producers {
            producer.join().expect("producer panicked");
        }
        items.sort();
        assert_eq!(items, [1, 2]);
        assert_eq!(queue.pop(), None);
    });
}

/// Two producers contend for a single slot while a consumer pops once,
/// each thread making a single attempt (so no thread spins on another's
/// retries). Every item ends up exactly once either popped, still queued,
/// or handed back in `Full`, and `Full` is seen at most once: the second
/// rejection would need two items in a one-slot queue.
#[test]
fn two_producers_one_consumer_capacity_1() {
    ::loom::model(|| {
        let queue = Arc::new(ArrayMpmcQueue::<u32, 1>::new());
        let producers: Vec<_> = [1, 2]
            .into_iter()
            .map(|item| {
                let queue = Arc::clone(&queue);
                thread::spawn(move || queue.try_push(item).err().map(|error| error.into_inner()))
            })
            .collect();
        let popped = queue.pop();
        let rejected: Vec<u32> = producers
            .into_iter()
            .filter_map(|producer| producer.join().expect("producer panicked"))
            .collect();
        assert!(rejected.len() <= 1, "Full twice: {rejected:?}");
        let mut items: Vec<u32> = rejected;
        items.extend(popped);
        items.extend(queue.pop());
        items.sort();
        assert_eq!(items, [1, 2]);
        assert!(queue.is_empty());
    });
}

/// A single consumer that saw `is_empty()` turn false must get an item
/// from `pop`, even if the push it saw has claimed its slot but not yet
/// stored the item.
#[test]
fn pop_after_non_empty_finds_the_item() {
    ::loom::model(|| {
        let queue = Arc::new(ArrayMpmcQueue::<u32, 2>::new());
        let producer = {
            let queue = Arc::clone(&queue);
            thread::spawn(move || queue.try_push(7).expect("room"))
        };
        while queue.is_empty() {
            thread::yield_now();
        }
        assert_eq!(queue.pop(), Some(7));
        producer.join().expect("producer panicked");
    });
}

/// Caller-provided storage behaves like the inline form across threads.
#[test]
fn caller_storage_push_pop_race() {
    ::loom::model(|| {
        let slots: Box<[MpmcSlot<u32>]> = (0..2).map(|_| MpmcSlot::new()).collect();
        let queue = Arc::new(dinah_core::MpmcQueue::with_storage(slots).expect("two slots"));
        let producer = {
            let queue = Arc::clone(&queue);
            thread::spawn(move || {
                queue.try_push(1).expect("room");
                queue.try_push(2).expect("room");
            })
        };
        let mut received = Vec::new();
        while received.len() < 2 {
            match queue.pop() {
                Some(item) => received.push(item),
                None => thread::yield_now(),
            }
        }
        producer.join().expect("producer panicked");
        assert_eq!(received, [1, 2]);
    });
}
