/// Where one field of a CSV record is in its `CSVText`: offsets, nothing secret.
struct CSVField {
    let range: Range<Int>

    var isEmpty: Bool { range.isEmpty }
}
