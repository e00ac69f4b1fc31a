package androidx.camera.core; public interface ImageProxy extends AutoCloseable { void close(); ImageInfo getImageInfo(); android.graphics.Bitmap toBitmap(); }
