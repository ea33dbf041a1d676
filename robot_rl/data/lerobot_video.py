"""MP4 encoding and decoding of camera frames for LeRobot "video" features, through PyAV (optional).

PyAV (``pip install av``) bundles FFmpeg and is ~30 MB, so it is not a dependency: without it, record
camera frames as "image" features (PNG inside the Parquet files). Codec: H.264 in yuv420p when the FFmpeg
build has an encoder for it, else MPEG-4 part 2; LeRobot's own default is AV1 (libsvtav1), which any
FFmpeg-based reader (PyAV, torchcodec) also decodes. Lossy: decoded frames differ from the originals by a
few levels per pixel.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from robot_rl.data.lerobot_format import DatasetError

CODECS = ("libx264", "h264", "libopenh264", "mpeg4")


def _av():
    try:
        import av
    except ImportError:
        raise DatasetError("video features need PyAV: pip install av (or record cameras as 'image' features)") from None
    return av


def encode_video(frames: np.ndarray, path: Path, fps: int) -> str:
    """Write uint8 (T, H, W, 3) frames to ``path`` (MP4); returns the codec used."""
    av = _av()
    frames = np.asarray(frames, dtype=np.uint8)
    if frames.ndim != 4 or frames.shape[3] != 3 or frames.shape[1] % 2 or frames.shape[2] % 2:
        raise DatasetError(f"{path}: video frames must be (T, H, W, 3) with even H and W, got {frames.shape}")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp.mp4")
    for codec in CODECS:
        try:
            with av.open(str(tmp), mode="w") as container:
                stream = container.add_stream(codec, rate=int(fps))
                stream.width, stream.height, stream.pix_fmt = frames.shape[2], frames.shape[1], "yuv420p"
                for frame in frames:
                    for packet in stream.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")):
                        container.mux(packet)
                for packet in stream.encode():
                    container.mux(packet)
        except (ValueError, getattr(av, "FFmpegError", OSError)):
            continue  # this FFmpeg build has no such encoder: try the next
        tmp.replace(path)
        return codec
    raise DatasetError(f"{path}: PyAV has none of the encoders {CODECS}")


def decode_video(path: Path) -> np.ndarray:
    """Every frame of an MP4 file as uint8 (T, H, W, 3)."""
    av = _av()
    with av.open(str(path)) as container:
        frames = [frame.to_ndarray(format="rgb24") for frame in container.decode(video=0)]
    return np.stack(frames) if frames else np.zeros((0, 0, 0, 3), dtype=np.uint8)
