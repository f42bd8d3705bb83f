// SPDX-License-Identifier: GPL-2.0

//! A fixed-capacity list that never allocates: completions collected under a spinlock and
//! posted after it is released, at most `N` at a time, so that no completion depends on an
//! allocation that may fail (the caller posts a full batch and goes on with the next).

/// Up to `N` values of `T`, in insertion order.
#[derive(Clone, Copy, Debug)]
pub struct Batch<T: Copy, const N: usize> {
    items: [Option<T>; N],
    len: usize,
}

impl<T: Copy, const N: usize> Default for Batch<T, N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Copy, const N: usize> Batch<T, N> {
    /// An empty batch.
    pub const fn new() -> Self {
        Batch {
            items: [None; N],
            len: 0,
        }
    }

    /// Appends `v`; gives it back when the batch is full.
    pub fn push(&mut self, v: T) -> Result<(), T> {
        match self.items.get_mut(self.len) {
            Some(slot) => {
                *slot = Some(v);
                self.len += 1;
                Ok(())
            }
            None => Err(v),
        }
    }

    /// How many values it holds.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it holds nothing.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether another `push` would fail.
    pub fn is_full(&self) -> bool {
        self.len == N
    }

    /// The values, oldest first.
    pub fn iter(&self) -> impl Iterator<Item = T> + '_ {
        self.items.iter().take(self.len).filter_map(|v| *v)
    }
}

#[cfg(test)]
mod tests {
    use super::Batch;

    #[test]
    fn keeps_order_and_refuses_past_capacity() {
        let mut b: Batch<u32, 3> = Batch::new();
        assert!(b.is_empty());
        assert_eq!(b.push(1), Ok(()));
        assert_eq!(b.push(2), Ok(()));
        assert_eq!(b.push(3), Ok(()));
        assert!(b.is_full());
        assert_eq!(b.push(4), Err(4));
        assert_eq!(b.len(), 3);
        let got: [u32; 3] = {
            let mut it = b.iter();
            [it.next().unwrap(), it.next().unwrap(), it.next().unwrap()]
        };
        assert_eq!(got, [1, 2, 3]);
    }
}
