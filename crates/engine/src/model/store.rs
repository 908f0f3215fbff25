//! [`Store`]: the model's collections. Each item keeps the index it was given when it was added
//! (its *global* index, stable for the life of the model), while the retention policy may remove
//! old items from the middle. A lookup by global index is direct where no item was removed on
//! both sides of it (as the policy removes old items) and a binary search between two bounds
//! otherwise; the retained items are also a plain slice in order, for views that page through
//! them.

use std::ops::{Index, IndexMut};

/// Items in the order they were added, addressed by their global index.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Store<T> {
    keys: Vec<usize>,
    items: Vec<T>,
    next: usize,
}

impl<T> Default for Store<T> {
    fn default() -> Self {
        Self {
            keys: Vec::new(),
            items: Vec::new(),
            next: 0,
        }
    }
}

impl<T> Store<T> {
    /// Adds an item; returns its global index.
    pub fn push(&mut self, item: T) -> usize {
        let index = self.next;
        if self.items.len() == self.items.capacity() {
            // Grow by a quarter, not by doubling: a full store of large items (calls, streams)
            // then wastes at most a fifth of its memory on spare room instead of half.
            let more = (self.items.len() / 4).max(16);
            self.items.reserve_exact(more);
            self.keys.reserve_exact(more);
        }
        self.keys.push(index);
        self.items.push(item);
        self.next += 1;
        index
    }

    /// The global index the next item will get: how many were ever added.
    pub fn next_index(&self) -> usize {
        self.next
    }

    /// How many items are retained.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether no item is retained.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// How many items were removed by the retention policy.
    pub fn evicted(&self) -> usize {
        self.next - self.items.len()
    }

    /// The position among the retained items of the item with this global index.
    ///
    /// Global indices strictly increase along the store, so the item can sit no further from
    /// the start than `index - first`, nor nearer the end than the number of indices given
    /// after it: with removals mostly at the old end (as the retention policy makes them),
    /// one of these two bounds is the answer and no search is needed.
    pub fn rank_of(&self, index: usize) -> Option<usize> {
        let first = *self.keys.first()?;
        if index < first || index >= self.next {
            return None;
        }
        let len = self.keys.len();
        let hi = (index - first).min(len - 1);
        let lo = len.saturating_sub(self.next - index);
        if lo > hi {
            return None;
        }
        if self.keys[lo] == index {
            return Some(lo);
        }
        if self.keys[hi] == index {
            return Some(hi);
        }
        self.keys[lo..=hi]
            .binary_search(&index)
            .ok()
            .map(|rank| lo + rank)
    }

    /// The global index of the retained item at `rank`.
    pub fn index_at(&self, rank: usize) -> Option<usize> {
        self.keys.get(rank).copied()
    }

    /// The item with this global index, if it is retained.
    pub fn get(&self, index: usize) -> Option<&T> {
        self.rank_of(index).map(|rank| &self.items[rank])
    }

    /// The item with this global index, if it is retained, mutably.
    pub fn get_mut(&mut self, index: usize) -> Option<&mut T> {
        self.rank_of(index).map(move |rank| &mut self.items[rank])
    }

    /// Whether the item with this global index is retained.
    pub fn contains(&self, index: usize) -> bool {
        self.rank_of(index).is_some()
    }

    /// The retained items, in order.
    pub fn as_slice(&self) -> &[T] {
        &self.items
    }

    /// The retained items, in order.
    pub fn iter(&self) -> std::slice::Iter<'_, T> {
        self.items.iter()
    }

    /// The retained items, in order, mutably.
    pub fn iter_mut(&mut self) -> std::slice::IterMut<'_, T> {
        self.items.iter_mut()
    }

    /// The retained items with their global indices, in order.
    pub fn indexed(&self) -> impl DoubleEndedIterator<Item = (usize, &T)> {
        self.keys.iter().copied().zip(self.items.iter())
    }

    /// The last retained item.
    pub fn last(&self) -> Option<&T> {
        self.items.last()
    }

    /// Removes every item for which `keep` says false; returns how many were removed. Each
    /// kept item moves at most once.
    pub fn retain(&mut self, mut keep: impl FnMut(usize, &T) -> bool) -> usize {
        let Self { keys, items, .. } = self;
        let before = items.len();
        let mut read = 0;
        let mut write = 0;
        items.retain(|item| {
            let key = keys[read];
            read += 1;
            let kept = keep(key, item);
            if kept {
                // `write <= read`: the key overwritten was read already.
                keys[write] = key;
                write += 1;
            }
            kept
        });
        keys.truncate(write);
        if items.capacity() > 2 * write + 64 {
            items.shrink_to(write + write / 4);
            keys.shrink_to(write + write / 4);
        }
        before - write
    }
}

impl<T> Index<usize> for Store<T> {
    type Output = T;

    /// The item with this global index. Panics if it is not retained: the model's own code
    /// indexes only items it knows are there; views use [`Store::get`].
    fn index(&self, index: usize) -> &T {
        match self.rank_of(index) {
            Some(rank) => &self.items[rank],
            None => panic!("model store: item {index} is not retained"),
        }
    }
}

impl<T> IndexMut<usize> for Store<T> {
    fn index_mut(&mut self, index: usize) -> &mut T {
        match self.rank_of(index) {
            Some(rank) => &mut self.items[rank],
            None => panic!("model store: item {index} is not retained"),
        }
    }
}

impl<'a, T> IntoIterator for &'a Store<T> {
    type Item = &'a T;
    type IntoIter = std::slice::Iter<'a, T>;

    fn into_iter(self) -> Self::IntoIter {
        self.items.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn global_indices_survive_removal_from_the_middle() {
        let mut store = Store::default();
        for i in 0..10 {
            assert_eq!(store.push(i * 10), i);
        }
        assert_eq!(store.retain(|i, _| i % 3 == 0), 6);
        assert_eq!(store.len(), 4);
        assert_eq!(store.next_index(), 10);
        assert_eq!(store.evicted(), 6);
        assert_eq!(store.get(3), Some(&30));
        assert_eq!(store.get(4), None);
        assert_eq!(store[9], 90);
        assert_eq!(store.rank_of(6), Some(2));
        assert_eq!(store.index_at(2), Some(6));
        assert_eq!(store.as_slice(), &[0, 30, 60, 90]);
        assert_eq!(store.push(100), 10);
        assert_eq!(store.last(), Some(&100));
    }

    /// Every global index, retained or not, against a linear search, after removals of many
    /// shapes (old end, new end, middle, scattered) and pushes after them.
    #[test]
    fn ranks_agree_with_a_linear_search() {
        let shapes: [fn(usize) -> bool; 6] = [
            |i| i >= 40,
            |i| i < 60,
            |i| !(30..50).contains(&i),
            |i| i % 7 != 3,
            |i| i % 2 == 0 || i > 90,
            |_| false,
        ];
        for shape in shapes {
            let mut store = Store::default();
            for i in 0..100 {
                store.push(i);
            }
            store.retain(|i, _| shape(i));
            for i in 100..110 {
                store.push(i);
            }
            let keys: Vec<usize> = store.indexed().map(|(i, _)| i).collect();
            for index in 0..120 {
                let linear = keys.iter().position(|&k| k == index);
                assert_eq!(store.rank_of(index), linear, "index {index}");
                assert_eq!(store.get(index).copied(), linear.map(|_| index));
            }
        }
    }
}
