"""Reading the flood-depth grids of ``hazard.raster``.

ESRI ASCII, plain or gzip, from a directory or a tar archive.

An ESRI ASCII grid is six header lines (``ncols``, ``nrows``, ``xllcorner`` or ``xllcenter``,
``yllcorner`` or ``yllcenter``, ``cellsize``, ``NODATA_value``) and ``nrows`` rows of
``ncols`` values, the first row the northernmost. Every grid of a series must share one
geometry. Problems are ``ConfigError``s naming the file and what to do.

Every value is a depth in metres in [0, ``MAX_DEPTH_M``] or the grid's ``NODATA_value`` (a cell
outside the modelled area). A ``nan`` cell is NODATA only in a grid whose ``NODATA_value`` is
``nan`` (as GDAL writes float grids); in any other grid it is an error naming its row and
column, as is an infinite, negative or too deep value: a cell is never dropped silently.
``hazard.raster.path`` and every grid must be a directory or a regular file (a FIFO or a device
would block or never end), and a damaged archive (cut short by an interrupted download, or
corrupt) is said to be one.
"""

from __future__ import annotations

import gzip
import io
import lzma
import math
import tarfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

import numpy as np

from governed_broker.config.base import ConfigError, excerpt
from governed_broker.config.raster import RasterConfig
from governed_broker.config.world import MAX_DEPTH_M

#: Largest grid read (bytes of text, after decompression): a 10,000 x 10,000 grid.
MAX_GRID_BYTES = 1 << 30

_HEADER_KEYS = ("ncols", "nrows", "xll", "yll", "cellsize", "nodata_value")


@dataclass(frozen=True)
class GridGeometry:
    """Where a grid lies: size in cells, lower-left corner and cell size (grid units)."""

    ncols: int
    nrows: int
    xllcorner: float
    yllcorner: float
    cellsize: float
    #: Not part of the geometry: grids of a series may mark NODATA differently (and NaN is
    #: never equal to itself).
    nodata: float | None = field(compare=False)

    def cell_of(self, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Row (0 = northernmost) and column of points; -1 where a point is off the grid."""
        col = np.floor((np.asarray(x, float) - self.xllcorner) / self.cellsize).astype(np.int64)
        up = np.floor((np.asarray(y, float) - self.yllcorner) / self.cellsize).astype(np.int64)
        row = self.nrows - 1 - up
        off = (col < 0) | (col >= self.ncols) | (row < 0) | (row >= self.nrows)
        return np.where(off, -1, row), np.where(off, -1, col)


#: What reading a damaged (cut short or corrupt) tar archive raises (bz2 damage surfaces as
#: OSError or EOFError).
_DAMAGED = (tarfile.TarError, EOFError, zlib.error, lzma.LZMAError, OSError)


def archive_hint(raster: RasterConfig) -> str:
    """What to do when the grids cannot be read."""
    return (f"hazard.raster.path must name the directory or .tar/.tar.gz archive holding the "
            f"grids {sorted(raster.grids.values())[:2]}...; fetch the archive named in the "
            "experiment's hazard.source (docs/hindcast.md says where the Passaic grids come "
            "from) and point hazard.raster.path at it, e.g. --set hazard.raster.path=FILE")


def _check_member_name(name: str, where: str) -> None:
    parts = PurePosixPath(name).parts
    if not name or name.startswith("/") or ".." in parts or "\\" in name:
        raise ConfigError(f"{where}: grid name {excerpt(name, 80)!r} must be a relative path "
                          "inside hazard.raster.path without '..'")


class GridSource:
    """The grids of a ``RasterConfig`` read from a directory or a tar archive.

    Args:
        raster: The section.
        path: ``raster.path`` resolved against the experiment's folder.
    """

    def __init__(self, raster: RasterConfig, path: Path) -> None:
        self.raster, self.path = raster, Path(path)
        if not self.path.exists():
            raise ConfigError(f"hazard.raster.path: {self.path} not found. {archive_hint(raster)}")
        if not (self.path.is_dir() or self.path.is_file()):
            raise ConfigError(f"hazard.raster.path: {self.path} is neither a directory nor a "
                              f"regular file (a FIFO, a device or a socket is not a regular "
                              f"file). {archive_hint(raster)}")
        for name in raster.grids.values():
            _check_member_name(name, "hazard.raster.grids")

    def texts(self, header_only: bool = False):
        """``(year, name, text)`` of every grid in year order.

        Only the header lines when ``header_only``.
        """
        order = sorted(self.raster.grids)
        if self.path.is_dir():
            for year in order:
                name = self.raster.grids[year]
                file = self.path / name
                if not file.is_file():
                    what = "is not a regular file" if file.exists() else "not found"
                    raise ConfigError(f"hazard.raster.grids.{year}: {file} {what}. "
                                      f"{archive_hint(self.raster)}")
                with open(file, "rb") as handle:
                    yield year, name, self._decode(name, handle.read(MAX_GRID_BYTES + 1),
                                                   header_only)
            return
        try:
            archive = tarfile.open(self.path, "r:*")
        except PermissionError as exc:  # an OSError, but not damage
            raise ConfigError(f"hazard.raster.path: {self.path} cannot be read "
                              f"({exc.strerror})") from None
        except tarfile.ReadError:
            raise ConfigError(
                f"hazard.raster.path: {self.path} is a regular file but not a tar archive "
                f"(.tar, .tar.gz, .tar.bz2 or .tar.xz), or one damaged at its start; "
                f"{archive_hint(self.raster)}") from None
        except _DAMAGED as exc:
            raise self._damaged("its first member", exc) from None
        with archive:
            for year in order:
                name = self.raster.grids[year]
                try:
                    data = self._member(archive, year, name)
                except _DAMAGED as exc:
                    raise self._damaged(f"grid {name!r}", exc) from None
                yield year, name, self._decode(name, data, header_only)
            try:
                complete = _ends_cleanly(archive)
            except _DAMAGED as exc:
                raise self._damaged("its end", exc) from None
            if not complete:
                raise self._damaged("its end", tarfile.ReadError(
                    "it ends before its end-of-archive marker"))

    def _member(self, archive: tarfile.TarFile, year: int, name: str) -> bytes:
        """The bytes of the archive's grid ``name`` (the grid of ``year``)."""
        try:
            member = archive.getmember(name)
        except KeyError:
            if not _ends_cleanly(archive):  # cut short before the member: damaged, not wrong
                raise tarfile.ReadError("it ends before its end-of-archive marker") from None
            raise ConfigError(f"hazard.raster.grids.{year}: {name!r} is not in {self.path}. "
                              f"{archive_hint(self.raster)}") from None
        if not member.isfile() or member.size > MAX_GRID_BYTES:
            raise ConfigError(f"hazard.raster.grids.{year}: {name!r} in {self.path} is "
                              f"not a regular file of at most {MAX_GRID_BYTES} bytes")
        data = archive.extractfile(member).read()
        if len(data) != member.size:
            raise tarfile.ReadError(f"{len(data)} of its {member.size} bytes are there")
        return data

    def _damaged(self, where: str, exc: BaseException) -> ConfigError:
        return ConfigError(
            f"hazard.raster.path: {self.path} is damaged: reading {where} failed "
            f"({type(exc).__name__}: {str(exc)[:120]}); the archive is truncated or corrupt (an "
            f"interrupted download?): fetch it again. {archive_hint(self.raster)}")

    def _decode(self, name: str, data: bytes, header_only: bool) -> str:
        where = f"{self.path}: grid {name}"
        if name.endswith(".gz"):
            try:
                with gzip.GzipFile(fileobj=io.BytesIO(data)) as handle:
                    data = handle.read(MAX_GRID_BYTES + 1)
            except (OSError, EOFError, zlib.error) as exc:
                raise ConfigError(f"{where}: not a readable gzip file, truncated or corrupt "
                                  f"({type(exc).__name__}: {str(exc)[:120]})") from None
        if len(data) > MAX_GRID_BYTES:
            raise ConfigError(f"{where}: larger than {MAX_GRID_BYTES} bytes")
        if header_only:
            data = b"\n".join(data.split(b"\n", 6)[:6])
        try:
            return data.decode("ascii")
        except UnicodeDecodeError as exc:
            raise ConfigError(f"{where}: not an ESRI ASCII grid (non-ASCII byte at "
                              f"{exc.start})") from None


def _ends_cleanly(archive: tarfile.TarFile) -> bool:
    """Whether a tar archive whose members were all read ends with its end-of-archive marker.

    The marker is two zero blocks: a download cut short between two members has none, and its
    later members are missing. A compressed archive is read on to its compression's end, whose
    length and checksum are verified there (a stream cut short raises ``EOFError``): a cut in
    the last bytes loses no member but says the download did not finish.
    """
    archive.getmembers()
    archive.fileobj.seek(archive.offset)
    tail = archive.fileobj.read(2 * tarfile.BLOCKSIZE)
    while archive.fileobj.read(1 << 20):
        pass
    return len(tail) == 2 * tarfile.BLOCKSIZE and not tail.strip(b"\0")


def parse_header(text: str, where: str) -> tuple[GridGeometry, str]:
    """The geometry of an ESRI ASCII grid and the text after its header."""
    lines = text.split("\n", 6)
    if len(lines) < 6:
        raise ConfigError(f"{where}: not an ESRI ASCII grid (fewer than 6 header lines)")
    values: dict[str, float] = {}
    for line in lines[:6]:
        parts = line.split()
        if len(parts) != 2:
            raise ConfigError(f"{where}: header line {excerpt(line, 60)!r} is not 'key value'")
        key = parts[0].lower()
        key = "xll" if key in ("xllcorner", "xllcenter") else key
        key = "yll" if key in ("yllcorner", "yllcenter") else key
        try:
            values[key] = float(parts[1])
        except ValueError:
            raise ConfigError(f"{where}: header value {excerpt(parts[1], 30)!r} of {parts[0]} "
                              "is not a number") from None
        if parts[0].lower().endswith("center"):
            values[key + "_center"] = 1.0
    missing = [k for k in _HEADER_KEYS[:5] if k not in values]
    if missing:
        raise ConfigError(f"{where}: header lacks {missing}")
    infinite = [k for k in _HEADER_KEYS[:5] if not math.isfinite(values[k])]
    if infinite:
        raise ConfigError(f"{where}: header value(s) of {infinite} are not finite")
    cell = values["cellsize"]
    ncols, nrows = values["ncols"], values["nrows"]
    if not (cell > 0 and ncols >= 1 and nrows >= 1 and ncols == int(ncols)
            and nrows == int(nrows)):
        raise ConfigError(f"{where}: ncols, nrows must be positive integers and cellsize > 0")
    x, y = values["xll"], values["yll"]
    x -= cell / 2 if "xll_center" in values else 0.0
    y -= cell / 2 if "yll_center" in values else 0.0
    geometry = GridGeometry(int(ncols), int(nrows), x, y, cell, values.get("nodata_value"))
    return geometry, lines[6] if len(lines) > 6 else ""


def parse_depths(text: str, where: str) -> tuple[GridGeometry, np.ndarray]:
    """Geometry and depths (metres, ``nrows x ncols``, NaN where NODATA) of one grid."""
    geometry, body = parse_header(text, where)
    try:
        values = np.array(body.split(), dtype=np.float64)
    except ValueError:
        raise ConfigError(f"{where}: a grid value is not a number") from None
    if values.size != geometry.nrows * geometry.ncols:
        raise ConfigError(f"{where}: {values.size} values for {geometry.nrows} x "
                          f"{geometry.ncols} cells")
    grid = values.reshape(geometry.nrows, geometry.ncols)
    nodata = geometry.nodata
    if nodata is not None and math.isnan(nodata):
        outside = np.isnan(grid)  # declared: NaN is this grid's NODATA
    else:
        outside = grid == nodata if nodata is not None else np.zeros(grid.shape, bool)
    bad = ~outside & ~((grid >= 0) & (grid <= MAX_DEPTH_M))  # NaN fails both tests
    if bad.any():
        row, col = (int(i) for i in np.argwhere(bad)[0])
        value = grid[row, col]
        what = ("is NaN, which is NODATA only in a grid whose NODATA_value is nan"
                if np.isnan(value) else "is not finite" if np.isinf(value) else f"is {value:g}")
        raise ConfigError(
            f"{where}: the cell at row {row + 1}, column {col + 1} {what}; depths must be "
            f"metres in [0, {MAX_DEPTH_M:g}] or the NODATA_value ({int(bad.sum())} such "
            "cell(s) in all; row 1 is the northernmost)")
    grid[outside] = np.nan
    return geometry, grid


def check_grid_headers(raster: RasterConfig, path: Path) -> GridGeometry:
    """Every grid is readable and all share one geometry (reads only the headers)."""
    source = GridSource(raster, path)
    first: GridGeometry | None = None
    for year, name, text in source.texts(header_only=True):
        geometry, _ = parse_header(text + "\n", f"{path}: grid {name}")
        if first is None:
            first = geometry
        elif geometry != first:
            raise ConfigError(f"hazard.raster.grids.{year}: {name} has another geometry than "
                              f"the grid of {min(raster.grids)}; all grids must share one")
    return first


def load_depth_series(
    raster: RasterConfig, path: Path
) -> tuple[GridGeometry, dict[int, np.ndarray]]:
    """Geometry and depth grid (metres, NaN where NODATA) of every calendar year."""
    source = GridSource(raster, path)
    first: GridGeometry | None = None
    grids: dict[int, np.ndarray] = {}
    for year, name, text in source.texts():
        geometry, grid = parse_depths(text, f"{path}: grid {name}")
        if first is not None and geometry != first:
            raise ConfigError(f"hazard.raster.grids.{year}: {name} has another geometry than "
                              f"the grid of {min(raster.grids)}; all grids must share one")
        first = first or geometry
        grids[year] = grid
    return first, grids
