"""A literal, one-pair-at-a-time transcription of ../shared/spec/gatekeeper-gpu.md: the slow, obvious twin that the
vectorised faithful mode (mapper/filters/_faithful.py) is compared with on lengths and thresholds the published
oracle files do not cover. Plain Python integers, the spec's words and loops, no cleverness.
"""
LUT = [0x0, 0x1, 0x2, 0x3, 0x4, 0x7, 0x6, 0x7, 0x8, 0xF, 0xA, 0xF, 0xC, 0xF, 0xE, 0xF]
CODE = {ord("A"): 0, ord("C"): 1, ord("G"): 2, ord("T"): 3}
M32 = 0xFFFFFFFF


def encode(s, W):
    """Section 1: 16 bases a 32-bit word, first base in bits 31..30, last word left-aligned, zero-filled."""
    words = [0] * W
    for k, c in enumerate(s):
        words[k // 16] |= CODE[c] << (30 - 2 * (k % 16))
    return words


def to_int(words):
    value = 0
    for w in words:
        value = (value << 32) | w
    return value


def to_words(value, count):
    return [(value >> (32 * (count - 1 - j))) & M32 for j in range(count)]


def shift_2bit(words, i, towards_higher_index):
    """Section 4: the read as one multi-word string, shifted by i bases (2i bits), vacated bases 00."""
    W = len(words)
    value = to_int(words)
    value = value >> (2 * i) if towards_higher_index else (value << (2 * i)) & ((1 << (32 * W)) - 1)
    return to_words(value, W)


def fold(words2, A):
    """Section 2: XORed 2-bit words -> 1-bit words, 2-bit words 2j and 2j+1 in the upper and lower half of j."""
    out = [0] * A
    for j, x in enumerate(words2):
        bits = 0
        for b in range(16):
            bits = (bits << 1) | (1 if (x >> (30 - 2 * b)) & 3 else 0)
        out[j // 2] |= bits << 16 if j % 2 == 0 else bits
    return out


def amend(mask):
    """Section 5, word by word, left to right, the LUT window slid in place, then the three rules."""
    m = list(mask)
    for w in range(len(m)):
        t = m[w]
        if t == 0:
            continue
        for j in range(29):
            t |= LUT[(t >> j) & 0xF] << j
        if w > 0:
            p = m[w - 1]
            if (p >> 2) & 1 and (t >> 31) & 1:
                p |= 0x3
            if (p >> 1) & 1 and (t >> 30) & 1:
                t |= 1 << 31
                p |= 1
            if p & 1 and (t >> 29) & 1:
                t |= (1 << 31) | (1 << 30)
            m[w - 1] = p
        m[w] = t
    return m


def count(words):
    """Section 7: per aligned nibble, 0000 -> 0, 0101 0110 1001 1010 1011 1101 -> 2, else 1."""
    total = 0
    for w in words:
        for k in range(8):
            nib = (w >> (4 * k)) & 0xF
            total += 0 if nib == 0 else 2 if nib in (0x5, 0x6, 0x9, 0xA, 0xB, 0xD) else 1
    return total


def gatekeeper(s1, s2, E):
    """(pass, estimate) of the published filter for the pair (s1 shifted, s2 fixed), bytes of equal length."""
    L = len(s1)
    if L <= 16 or any(c not in CODE for c in s1 + s2):
        return True, -2
    W = -(-L // 16)
    A = -(-W // 2)
    read, ref = encode(s1, W), encode(s2, W)
    xor = [a ^ b for a, b in zip(read, ref)]
    h = bin(to_int(fold(xor, A))).count("1")
    if h <= E:
        return True, h
    if E == 0:
        return False, -1
    acc = amend(fold(xor, A))
    for i in range(1, E + 1):
        dele = amend(fold([a ^ b for a, b in zip(shift_2bit(read, i, True), ref)], A))
        dele[0] |= 0x80000000 >> (i - 1)
        ins = amend(fold([a ^ b for a, b in zip(shift_2bit(read, i, False), ref)], A))
        ins[A - 1] |= 1 << (i - 1)
        acc = [a & d & s for a, d, s in zip(acc, dele, ins)]
    c = count(acc)
    return (True, c) if c <= E else (False, -1)
