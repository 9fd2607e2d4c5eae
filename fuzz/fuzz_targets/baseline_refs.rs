//! Feeds arbitrary bytes to the streaming reader of the baseline's refs
//! file (`baseline::each_ref_from`, what a full-read verify compares the
//! refs with). Whatever the input it returns, never panics; what it
//! accepts is JSON serde_json accepts too, of the one field `refs` whose
//! entries are the ones handed over, in the same order; and the map arm
//! would write of them reads back the same.
#![no_main]

use grantguard::baseline::each_ref_from;
use grantguard::repo::refname;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut read: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    let accepted = each_ref_from(data, &mut |n, v| read.push((n.to_vec(), v.to_vec()))).is_ok();
    if !accepted {
        return;
    }
    let value: serde_json::Value =
        serde_json::from_slice(data).expect("what the reader accepts is JSON");
    let object = value.as_object().expect("an object");
    assert_eq!(object.len(), 1);
    let refs = object["refs"].as_object().expect("a map of refs");
    // Names strictly increasing: no two decode alike, so serde_json's map
    // (which keeps the last of two equal keys) holds each of them.
    assert_eq!(refs.len(), read.len());
    for (name, value) in &read {
        let text = refname::encode(name);
        let stored = refname::decode(refs[&text].as_str().expect("a string")).unwrap();
        assert_eq!(&stored[..], &value[..]);
    }
    assert!(read.windows(2).all(|w| w[0].0 < w[1].0));
    // Written as arm writes it: in the order of the names, not of their
    // encoded text (a `hex:` form sorts apart from its name).
    let mut again = b"{\"refs\":{".to_vec();
    for (i, (n, v)) in read.iter().enumerate() {
        if i > 0 {
            again.push(b',');
        }
        serde_json::to_writer(&mut again, &refname::encode(n)).unwrap();
        again.push(b':');
        serde_json::to_writer(&mut again, &refname::encode(v)).unwrap();
    }
    again.extend_from_slice(b"}}");
    let mut twice = Vec::new();
    each_ref_from(&again[..], &mut |n, v| twice.push((n.to_vec(), v.to_vec()))).unwrap();
    assert_eq!(twice, read);
});
